"""``arena servers``: the catalog, what is installed and its versions (``--json``:
schemas/servers.schema.json)."""


from rich.markup import escape
from rich.table import Table

from arena.cli.args import add_format, print_json
from arena.app.servers import servers
from arena.servers import catalog

NAME = "servers"


def add(sub) -> None:
    p = sub.add_parser(NAME, help="list the servers Arena knows, their knobs and what is installed")
    add_format(p, NAME)


def run(args, out) -> int:
    if args.format == "json":
        doc = {"schema": "arena/servers/1", "servers": [
            {"name": i.server.name, "language": i.server.language, "model": i.server.model,
             "knobs": {k: {"default": v.default, "env": v.env, "why": v.why} for k, v in i.server.knobs.items()},
             "settings": list(catalog.options_for(i.server)), "apps": list(i.server.apps),
             "available": i.available, "install": None if i.available else i.server.install_hint, "version": i.version}
            for i in servers()], "not_run": dict(catalog.MISSING), "how_to_add": dict(catalog.HOW_TO_ADD)}
        print_json(doc)
        return 0
    table = Table(title="Servers")
    for col in ("name", "language", "model", "knobs (default)", "settings", "apps", "available", "version"):
        table.add_column(col)
    infos = servers()
    for info in infos:
        s = info.server
        knobs = ", ".join(f"{k}={'server default' if v.default is None else v.default}"
                          + (f" (${v.env})" if v.env else "") for k, v in s.knobs.items()) or "none"
        settings = ", ".join(catalog.options_for(s))
        table.add_row(s.name, s.language, s.model, knobs, escape(settings), ", ".join(s.apps),
                      "yes" if info.available else escape(f"no: {s.install_hint}"), info.version or "-")
    out.print(table)
    out.print(f"Installed: {sum(i.available for i in infos)} of {len(infos)}. To add one:", highlight=False)
    for language, how in catalog.HOW_TO_ADD.items():
        out.print(f"  {language.capitalize()} servers: {how}", highlight=False, markup=False)
    out.print("Not run by Arena:", highlight=False)
    for name, why in catalog.MISSING.items():
        out.print(f"  {name}: {why}", highlight=False, markup=False)
    return 0
