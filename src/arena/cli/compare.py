"""``arena compare BASE NEW``: two experiments cell by cell, ratios with intervals and verdicts;
``--fail-on`` rules make a regression exit 1 (for CI); text, Markdown, JSON or JUnit XML."""

import sys

from rich.markup import escape
from rich.table import Table

from arena.app.compare import compare
from arena.cli.args import EXIT_FAILED, add_store, say_store, add_format, print_json
from arena.report.comparison_view import HEAD, compare_json, rows, verdict_line
from arena.report.formats import CompareView, render

NAME = "compare"


def add(sub) -> None:
    cp = sub.add_parser(NAME, help="compare two experiments cell by cell (a release against the last one)",
                        description="Each side: an experiment in --store, STORE.db:NAME, or a file written by "
                                    "`arena export NAME --format json`. Example: arena compare base.db:quick quick "
                                    "--fail-on \"p99>+10%,throughput<-5%\" --format markdown")
    cp.add_argument("base", help="the experiment to compare against (NAME, STORE.db:NAME or EXPORT.json)")
    cp.add_argument("new", help="the experiment compared (NAME, STORE.db:NAME or EXPORT.json)")
    add_store(cp)
    cp.add_argument("--fail-on", metavar="RULES",
                    help="exit 1 when a change is declared and beyond a limit, e.g. \"p99>+10%%,throughput<-5%%\" "
                         "(figures: throughput, p50, p99, memory)")
    add_format(cp, NAME, "junit: a test case per cell and figure, failed where a --fail-on rule is broken")


def run(args, out) -> int:
    got = compare(args.base, args.new, args.store, args.fail_on)
    parts = (got.base, got.new, got.changes, got.alone, got.broken, got.rules)
    if args.format == "json":
        print_json(compare_json(*parts))
    elif args.format != "text":  # a registered format (report/formats/)
        sys.stdout.write(render(NAME, args.format, CompareView(*parts)))
    else:
        say_store(out, args.store)
        table = Table(title=f"{got.new} against {got.base}: medians, ratios new / base (95% interval), verdicts")
        for col in HEAD:
            table.add_column(col, overflow="fold")
        for row in rows(got.changes):
            table.add_row(*(escape(x) for x in row))
        out.print(table)
        for a in got.alone:
            out.print(a, highlight=False, markup=False)
        out.print(verdict_line(got.broken, got.rules), highlight=False, markup=False)
    return EXIT_FAILED if got.broken else 0
