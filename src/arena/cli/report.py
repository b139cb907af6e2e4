"""``arena report``: an experiment's HTML report (and its charts as files)."""

import os

from arena.app.report import report
from arena.cli.args import add_store, positive
from arena.results.ranking import Limits

NAME = "report"


def add(sub) -> None:
    rp = sub.add_parser(NAME, help="write an experiment's HTML report (one self-contained file)")
    rp.add_argument("experiment", nargs="?", help="experiment name (default: the store's most recent)")
    add_store(rp)
    rp.add_argument("-o", "--output", help="HTML file (default: arena-report-EXPERIMENT.html)")
    rp.add_argument("--p99-max", type=positive("--p99-max"), metavar="MS", help="ranking: p99 limit in ms")
    rp.add_argument("--memory-max", type=positive("--memory-max"), metavar="MIB", help="ranking: PSS limit in MiB")
    rp.add_argument("--export", metavar="DIR", help="also write each chart's data (CSV) and picture into DIR")
    rp.add_argument("--format", choices=("svg", "png"), default="svg", help="picture format for --export")


def run(args, out) -> int:
    done = report(args.store, args.experiment, Limits(args.p99_max, args.memory_max), args.output, args.export,
                  args.format)
    out.print(f"report of {done.name} ({done.runs} runs, {done.charts} charts): {done.path}", highlight=False)
    if args.export:
        out.print(f"{len(done.exported)} files (CSV and {args.format.upper()} per chart) in "
                  f"{os.path.abspath(args.export)}", highlight=False)
    return 0
