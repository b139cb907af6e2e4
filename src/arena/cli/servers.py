"""``arena servers``: the catalog, what is installed and its versions (``--json``:
schemas/servers.schema.json)."""


import os

from rich.markup import escape
from rich.table import Table

from arena.errors import ArenaError
from arena.cli.args import add_format, count, positive, print_json
from arena.app.servers import servers
from arena.servers import catalog
from arena.servers.sizing import NOT_CORES, SIZINGS

NAME = "servers"


def add(sub) -> None:
    p = sub.add_parser(NAME, help="list the servers Arena knows, their knobs and what is installed")
    p.add_argument("--node-cores", type=count("--node-cores", 1, 4096), default=os.cpu_count() or 1, metavar="N",
                   help="the node's cores, for the process counts inside a container (default: this machine's)")
    p.add_argument("--cpu-limit", type=positive("--cpu-limit", hi=4096, what="a number of cores"), metavar="CORES",
                   help="a container's CPU quota on that node, in cores (0.5, 1)")
    add_format(p, NAME)


def run(args, out) -> int:
    if args.cpu_limit is not None and args.cpu_limit > args.node_cores:
        raise ArenaError(f"--cpu-limit {args.cpu_limit:g}: above the node's {args.node_cores} cores (--node-cores): "
                         "a quota larger than the node could never bind")
    if args.format == "json":
        doc = {"schema": "arena/servers/1", "servers": [
            {"name": i.server.name, "language": i.server.language, "model": i.server.model,
             "knobs": {k: {"default": v.default, "env": v.env, "why": v.why} for k, v in i.server.knobs.items()},
             "settings": list(catalog.options_for(i.server)), "apps": list(i.server.apps),
             "available": i.available, "install": None if i.available else i.server.install_hint, "version": i.version,
             "sizing": SIZINGS[i.server.name].figures(args.node_cores, args.cpu_limit)}
            for i in servers()], "not_run": dict(catalog.MISSING), "how_to_add": dict(catalog.HOW_TO_ADD),
            "node_cores": args.node_cores, "cpu_limit": args.cpu_limit}
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
    quota = f", cpu_limit {args.cpu_limit:g}" if args.cpu_limit else ""
    sized = Table(title=f"Processes as documented, inside a container (a node of {args.node_cores} cores{quota})")
    for col in ("name", "documented", "inside a container", "reference"):
        sized.add_column(col)
    for info in infos:
        z = SIZINGS[info.server.name]
        sized.add_row(info.server.name, escape(z.rule), escape(z.inside(args.node_cores, args.cpu_limit)), z.reference)
    out.print(sized)
    out.print(NOT_CORES, highlight=False, markup=False)
    out.print(f"Installed: {sum(i.available for i in infos)} of {len(infos)}. To add one:", highlight=False)
    for language, how in catalog.HOW_TO_ADD.items():
        out.print(f"  {language.capitalize()} servers: {how}", highlight=False, markup=False)
    out.print("Not run by Arena:", highlight=False)
    for name, why in catalog.MISSING.items():
        out.print(f"  {name}: {why}", highlight=False, markup=False)
    return 0

