"""``arena export``: an experiment's runs as JSON or CSV."""

import sys

from arena.app.experiments import export
from arena.cli.args import add_store, write

NAME = "export"


def add(sub) -> None:
    ex = sub.add_parser(NAME, help="write an experiment's runs as JSON or CSV (one row per run)")
    ex.add_argument("experiment")
    add_store(ex)
    ex.add_argument("--format", choices=("json", "csv"), default="csv")
    ex.add_argument("-o", "--output", help="file (default: standard output)")


def run(args, out) -> int:
    text = export(args.store, args.experiment, args.format)
    if args.output:
        write(args.output, text, "--output")
    else:
        sys.stdout.write(text)
    return 0
