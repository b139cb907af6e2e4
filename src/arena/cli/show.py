"""``arena show``: the answer, then the comparison table (and every run's summary with --runs)."""

from rich.markup import escape
from rich.table import Table

from arena.app.experiments import summaries
from arena.cli.args import add_store
from arena.report.summary import load_summary

NAME = "show"


def add(sub) -> None:
    sh = sub.add_parser(NAME, help="print an experiment's answer, its comparison table (and runs)")
    sh.add_argument("experiment", nargs="?", help="experiment name (default: every experiment in the store)")
    add_store(sh)
    sh.add_argument("--runs", action="store_true", help="also print every run's ab-style summary")


def run(args, out) -> int:
    for shown in summaries(args.store, args.experiment):
        res = shown.results
        if not res.runs:
            out.print(f"{res.name}: no runs yet", highlight=False, markup=False)
            continue
        if args.runs:
            for r in res.runs:
                out.print(f"\n[bold]{escape(r.run_key)}[/]" + ("" if r.valid else escape(f"  INVALID: {'; '.join(r.flags)}")))
                out.print(load_summary(r.load), highlight=False, markup=False)
        out.print(f"\n[bold]{escape(res.name)}[/]")
        for line in shown.answer:
            out.print(line, highlight=False, markup=False)
        out.print(terminal_table(shown.table, f"{res.name}: medians of valid repetitions; intervals of the medians"))
    return 0


def terminal_table(t, title: str | None = None) -> Table:
    """A report table (report.data.Table, plain text) as a terminal table under ``title`` (default: its own)."""
    table = Table(title=t.title if title is None else title)
    for col in t.head:
        table.add_column(col, overflow="fold")
    for row in t.rows:
        table.add_row(*(escape(c) for c in row))
    return table
