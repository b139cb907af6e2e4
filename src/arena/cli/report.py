"""``arena report``: an experiment's HTML report (and its charts as files)."""

from arena.app.report import build_report, default_path, export_charts, load_results, write_report
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
    res = load_results(args.store, args.experiment)
    report = build_report(res, Limits(args.p99_max, args.memory_max))
    path = write_report(report, args.output or default_path(res.name))
    out.print(f"report of {res.name} ({len(res.runs)} runs, {len(report.charts)} charts): {path}", highlight=False)
    if args.export:
        import os

        files = export_charts(report, args.export, args.format)
        out.print(f"{len(files)} files (CSV and {args.format.upper()} per chart) in {os.path.abspath(args.export)}",
                  highlight=False)
    return 0
