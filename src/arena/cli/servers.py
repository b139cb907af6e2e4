"""``arena servers``: the catalog, what is installed and its versions."""

from rich.markup import escape
from rich.table import Table

from arena.app.servers import servers
from arena.servers import catalog

NAME = "servers"


def add(sub) -> None:
    sub.add_parser(NAME, help="list the servers Arena knows, their knobs and what is installed")


def run(args, out) -> int:
    table = Table(title="Servers")
    for col in ("name", "language", "model", "knobs (default)", "settings", "apps", "available", "version"):
        table.add_column(col)
    for info in servers():
        s = info.server
        knobs = ", ".join(f"{k}={'server default' if v.default is None else v.default}"
                          + (f" (${v.env})" if v.env else "") for k, v in s.knobs.items()) or "none"
        settings = ", ".join(catalog.options_for(s))
        table.add_row(s.name, s.language, s.model, knobs, escape(settings), ", ".join(s.apps),
                      "yes" if info.available else escape(f"no: {s.install_hint}"), info.version or "-")
    out.print(table)
    out.print("Not run by Arena:", highlight=False)
    for name, why in catalog.MISSING.items():
        out.print(f"  {name}: {why}", highlight=False, markup=False)
    return 0
