"""``arena reproduce STUDY``: run a classic study's file into the store (resumable), then print each
published row beside the measured figures and the model's prediction for the original conditions,
with a verdict per figure and the rank agreement. ``--list``: the studies and their time here."""

from rich.markup import escape
from rich.table import Table

from arena.app.reproduce import reproduction, run_study, study_files
from arena.cli.args import add_format, add_store, print_json, saying
from arena.cli.run import add_retake, summary, with_progress
from arena.report.text_table import text_table
from arena.errors import ArenaError
from arena.reproduce.verdicts import Comparison
from arena.report.data import published_section
from arena.report.study_view import reproduce_json

NAME = "reproduce"


def add(sub) -> None:
    r = sub.add_parser(NAME, help="re-run a classic study and set it beside its published figures")
    r.add_argument("study", nargs="?", help="the study's id (arena reproduce --list)")
    r.add_argument("--list", action="store_true", help="list the studies, their study files and an estimate of the time")
    r.add_argument("--no-run", action="store_true", help="compare what the store holds, run nothing")
    add_retake(r)
    add_store(r)
    add_format(r, NAME, "json: the comparison alone on standard output; the runs' progress goes to standard error")


def run(args, out) -> int:
    if args.list and args.study:
        raise ArenaError(f"--list: lists every study; give it alone, or give the study '{args.study}' without it")
    if args.list or not args.study:
        return _list(out)
    code = 0
    out = saying(out, args)
    if not args.no_run:
        counts, names = with_progress(out, args.store, False,
                                      lambda planned, on_event: run_study(args.study, args.store, planned, on_event,
                                                                          retake_invalid=args.retake_invalid))
        code = summary(out, counts, names[0], args.store)
    found = reproduction(args.study, args.store)
    if args.format == "json":
        print_json(reproduce_json(found))
    else:
        render(found, out)
    return code


def _list(out) -> int:
    t = Table("study", "title", "year", "study file", "runs", "about")
    for sid, sf in study_files().items():
        runs = sum(len(g.runs) for g in sf.planned.groups)
        t.add_row(sid, escape(sf.study.title), str(sf.study.year or "-"), f"scenarios/{sf.path.name}", str(runs),
                  f"{sf.planned.estimate_s / 60:.0f} min")
    out.print(t)
    out.print("arena reproduce STUDY runs one (resumable) and prints it beside the published figures.", highlight=False)
    return 0


def render(c: Comparison, out) -> None:
    """The report's "Published vs here" section as text: its lead, tables and paragraphs."""
    section = published_section(c)
    out.print(f"[bold]{escape(section.title)}[/bold]: {escape(section.lead)}", highlight=False)
    for t in section.tables:
        out.print(text_table(t, t.title, out.width), markup=False, highlight=False, soft_wrap=True)
    for p in section.paragraphs:
        out.print(p, highlight=False, markup=False)
