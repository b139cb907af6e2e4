"""``arena report``: an experiment's HTML report (and its charts as files)."""

import os

from arena.app.report import report
from arena.cli.args import add_goal, add_store, count, say_store, goal_flags
from arena.report.data import TOP

NAME = "report"


def add(sub) -> None:
    rp = sub.add_parser(NAME, help="write an experiment's HTML report (one self-contained file)")
    rp.add_argument("experiment", nargs="?", help="experiment name (default: the store's most recent)")
    add_store(rp)
    rp.add_argument("-o", "--output", help="HTML file (default: arena-report-EXPERIMENT.html)")
    add_goal(rp)
    rp.add_argument("--export", metavar="DIR", help="also write each chart's data (CSV) and picture into DIR")
    rp.add_argument("--format", choices=("svg", "png"), default="svg", help="picture format for --export")
    rp.add_argument("--top", type=count("--top", 1, 1000), default=TOP, metavar="N",
                    help="the charts draw the N best configurations and each server's best (default: %(default)s); "
                         "the tables list every one")


def run(args, out) -> int:
    done = report(args.store, args.experiment, goal_flags(args), args.output, args.export,
                  args.format, args.top)
    say_store(out, args.store)
    out.print(f"report of {done.name} ({done.runs} runs, {done.charts} charts): {done.path}", highlight=False)
    if args.export:
        out.print(f"{len(done.exported)} files (CSV and {args.format.upper()} per chart) in "
                  f"{os.path.abspath(args.export)}", highlight=False)
    return 0
