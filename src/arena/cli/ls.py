"""``arena ls``: the experiments in a store."""

import datetime

from rich.markup import escape
from rich.table import Table

from arena.app.experiments import experiments
from arena.cli.args import add_store

NAME = "ls"


def add(sub) -> None:
    add_store(sub.add_parser(NAME, help="list the experiments in the store"))


def run(args, out) -> int:
    table = Table(title=f"experiments in {args.store}")
    for col in ("name", "file", "runs", "valid", "last run"):
        table.add_column(col)
    for e in experiments(args.store):
        last = datetime.datetime.fromtimestamp(e["last_run"]).isoformat(timespec="seconds") if e["last_run"] else "-"
        table.add_row(escape(e["name"]), escape(e["file"]), str(e["runs"]), str(e["valid"]), last)
    out.print(table)
    return 0
