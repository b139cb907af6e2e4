"""``arena export``: an experiment's runs as JSON or CSV; its latency histograms as HdrHistogram
logs (.hlog) or percentile distributions (.hgrm)."""

import os
import sys

from arena.app.storage import export, export_histograms
from arena.atomic import staging
from arena.cli.args import add_store, say_store, write
from arena.errors import ArenaError

NAME = "export"


def add(sub) -> None:
    ex = sub.add_parser(NAME, help="write an experiment's runs as JSON or CSV, its histograms as .hlog or .hgrm")
    ex.add_argument("experiment")
    add_store(ex)
    ex.add_argument("--format", choices=("json", "csv", "hlog", "hgrm"), default="csv",
                    help="csv: one row per run; json: every run whole; hlog: every run's latency histogram as an "
                         "HdrHistogram log; hgrm: each cell's merged histogram as a percentile distribution "
                         "(one file per cell: give -o DIR)")
    ex.add_argument("--per", choices=("run", "second"), default="run",
                    help="hlog: one interval histogram per run (its measured window, default) or per second of "
                         "each run's series")
    ex.add_argument("-o", "--output", help="file (a directory for hgrm; default: standard output)")


def run(args, out) -> int:
    if args.format == "hgrm":
        if not args.output:
            raise ArenaError("--format hgrm: writes one file per cell; give a directory with -o DIR")
        files = export_histograms(args.store, args.experiment, "hgrm")
        with staging(args.output, "--output") as stage:  # every cell's file, or none
            for file, text in files.items():
                (stage / file).write_text(text)
        say_store(out, args.store)
        out.print(f"{len(files)} percentile distributions (.hgrm) in {os.path.abspath(args.output)}", highlight=False)
        return 0
    if args.format == "hlog":
        (text,) = export_histograms(args.store, args.experiment, "hlog", args.per).values()
    else:
        text = export(args.store, args.experiment, args.format)
    if args.output:
        write(args.output, text, "--output")
        say_store(out, args.store)
    else:  # the data itself on stdout: nothing else there
        sys.stdout.write(text)
    return 0
