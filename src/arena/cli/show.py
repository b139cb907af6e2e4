"""``arena show``: the answer, then the comparison table (and every run's summary with --runs);
``--json``: the answer as JSON (schemas/answer.schema.json); ``--format`` any registered format
(report/formats/: markdown and junit for CI)."""

import sys

from rich.markup import escape

from arena.app.analysis import analyses
from arena.cli.args import EXIT_THRESHOLD, add_goal, add_store, say_store, goal_flags, add_format, print_json
from arena.report.answer_view import answer_lines, experiment_json, streams_lines, threshold_lines, why_lines
from arena.report.soak_view import soak_lines
from arena.report.data import comparison_table
from arena.report.formats import ShowView, render
from arena.report.text_table import text_table
from arena.report.summary import load_summary
from arena.report.tune_view import capacity_lines

NAME = "show"


def add(sub) -> None:
    sh = sub.add_parser(NAME, help="print an experiment's answer, its comparison table (and runs)")
    sh.add_argument("experiment", nargs="?", help="experiment name (default: every experiment in the store)")
    add_store(sh)
    add_goal(sh)
    sh.add_argument("--runs", action="store_true", help="also print every run's ab-style summary")
    add_format(sh, NAME, "junit: a test case per threshold and cell, per capacity searched, and the goal per workload")


def run(args, out) -> int:
    found = analyses(args.store, args.experiment, goal_flags(args))
    if args.format == "json":
        docs = [experiment_json(a.results.name, a.answers, a.results.cells, a.thresholds, a.capacities, a.why,
                                a.streams) for a in found]
        doc = docs if args.experiment is None else docs[0]
        print_json(doc)
        return EXIT_THRESHOLD if any(a.failed_thresholds for a in found) else 0
    if args.format != "text":  # a registered format (report/formats/)
        for a in found:
            sys.stdout.write(render(NAME, args.format, ShowView(a.results.name, a.answers, a.thresholds, a.capacities,
                                                                a.results.cells)))
        failed = any(a.failed_thresholds or a.without_capacity for a in found)
        return EXIT_THRESHOLD if failed else 0
    say_store(out, args.store)
    for a in found:
        res = a.results
        if not res.runs:
            out.print(f"{res.name}: no runs yet", highlight=False, markup=False)
            continue
        if args.runs:
            for r in res.runs:
                out.print(f"\n[bold]{escape(r.run_key)}[/]" + ("" if r.valid else escape(f"  INVALID: {'; '.join(r.flags)}")))
                out.print(load_summary(r.load), highlight=False, markup=False)
        out.print(f"\n[bold]{escape(res.name)}[/]")
        for answer in a.answers:
            for line in answer_lines(answer, len(a.answers) > 1):
                out.print(line, highlight=False, markup=False)
            for line in why_lines(a.why, answer):  # a finding a line, unbroken: its URL and figures stay whole
                out.print(line, highlight=False, markup=False, soft_wrap=True)
        for line in (capacity_lines(a.capacities) + streams_lines(a.streams, a.goal) + threshold_lines(a.thresholds)
                     + [x for s in a.soaks for x in soak_lines(s)]):
            out.print(line, highlight=False, markup=False)
        # made to the console's width already: written as it is (rich took 0.12 s to print 1,000 rows)
        out.file.write(text_table(comparison_table(res.cells), f"{res.name}: medians of valid repetitions; intervals "
                                  "of the medians", out.width) + "\n")
    return EXIT_THRESHOLD if any(a.failed_thresholds for a in found) else 0

