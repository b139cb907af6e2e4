"""``arena show``: the answer, then the comparison table (and every run's summary with --runs)."""

from rich.markup import escape
from rich.table import Table

from arena.app.experiments import open_store, results
from arena.cli.args import add_store
from arena.errors import ArenaError
from arena.report.data import comparison_table
from arena.report.summary import load_summary
from arena.results.aggregate import workloads
from arena.results.ranking import answer_lines, answers

NAME = "show"


def add(sub) -> None:
    sh = sub.add_parser(NAME, help="print an experiment's answer, its comparison table (and runs)")
    sh.add_argument("experiment", nargs="?", help="experiment name (default: every experiment in the store)")
    add_store(sh)
    sh.add_argument("--runs", action="store_true", help="also print every run's ab-style summary")


def run(args, out) -> int:
    with open_store(args.store) as store:
        names = [args.experiment] if args.experiment else [e["name"] for e in store.experiments()]
        if not names:
            raise ArenaError(f"--store {args.store}: the store has no experiment")
        shown = [results(store, name) for name in names]
    for res in shown:
        if not res.runs:
            out.print(f"{res.name}: no runs yet", highlight=False, markup=False)
            continue
        if args.runs:
            for r in res.runs:
                out.print(f"\n[bold]{escape(r.run_key)}[/]" + ("" if r.valid else escape(f"  INVALID: {'; '.join(r.flags)}")))
                out.print(load_summary(r.load), highlight=False, markup=False)
        many = len(workloads(res.cells)) > 1
        out.print(f"\n[bold]{escape(res.name)}[/]")
        for a in answers(res.cells):
            for line in answer_lines(a, many):
                out.print(line, highlight=False, markup=False)
        t = comparison_table(res.cells)
        table = Table(title=f"{res.name}: medians of valid repetitions; intervals of the medians")
        for col in t.head:
            table.add_column(col, overflow="fold")
        for row in t.rows:
            table.add_row(*(escape(c) for c in row))
        out.print(table)
    return 0
