"""``arena export``: an experiment's runs as JSON or CSV; its latency histograms as HdrHistogram
logs (.hlog) or percentile distributions (.hgrm)."""

import os
import sys

from arena.app.storage import export_files
from arena.atomic import staging
from arena.cli.args import add_store, say_store, write
from arena.errors import ArenaError
from arena.report.formats import formats, many, what

NAME = "export"


def add(sub) -> None:
    ex = sub.add_parser(NAME, help="write an experiment's runs as JSON or CSV, its histograms as .hlog or .hgrm")
    ex.add_argument("experiment")
    add_store(ex)
    offered = formats(NAME)  # report/formats/: the registry, csv first (the default)
    ex.add_argument("--format", choices=offered, default=offered[0],
                    help="; ".join(f"{f}: {what(f, NAME)}" for f in offered))
    ex.add_argument("--per", choices=("run", "second"), default="run",
                    help="hlog: one interval histogram per run (its measured window, default) or per second of "
                         "each run's series")
    ex.add_argument("-o", "--output", help="file (a directory for a format that writes one per cell; default: "
                                           "standard output)")


def run(args, out) -> int:
    if many(args.format) and not args.output:
        raise ArenaError(f"--format {args.format}: writes one file per cell; give a directory with -o DIR")
    files = export_files(args.store, args.experiment, args.format, args.per)
    if many(args.format):
        with staging(args.output, "--output") as stage:  # every cell's file, or none
            for file, text in files.items():
                (stage / file).write_text(text)
        say_store(out, args.store)
        out.print(f"{len(files)} files ({args.format}) in {os.path.abspath(args.output)}", highlight=False)
        return 0
    (text,) = files.values()
    if args.output:
        write(args.output, text, "--output")
        say_store(out, args.store)
    else:  # the data itself on stdout: nothing else there
        sys.stdout.write(text)
    return 0
