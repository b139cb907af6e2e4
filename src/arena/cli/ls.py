"""``arena ls``: the experiments in a store (``--json``: schemas/ls.schema.json)."""

import datetime

from rich.markup import escape
from rich.table import Table

from arena.app.storage import experiments
from arena.cli.args import add_store, add_format, print_json

NAME = "ls"


def add(sub) -> None:
    p = sub.add_parser(NAME, help="list the experiments in the store")
    add_store(p)
    add_format(p, NAME)


def _time(t: float | None) -> str | None:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="seconds") if t else None


def run(args, out) -> int:
    if args.format == "json":
        doc = {"schema": "arena/ls/1", "store": args.store,
               "experiments": [{"name": e["name"], "file": e["file"], "runs": e["runs"], "valid": e["valid"],
                                "created": _time(e["created_at"]), "last_run": _time(e["last_run"])}
                               for e in experiments(args.store)]}
        print_json(doc)
        return 0
    table = Table(title=f"experiments in {args.store}")
    for col in ("name", "file", "runs", "valid", "last run"):
        table.add_column(col)
    for e in experiments(args.store):
        last = datetime.datetime.fromtimestamp(e["last_run"]).isoformat(timespec="seconds") if e["last_run"] else "-"
        table.add_row(escape(e["name"]), escape(e["file"]), str(e["runs"]), str(e["valid"]), last)
    out.print(table)
    return 0
