"""The report of an experiment: built as data, written as HTML, exported as CSV and pictures."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arena.app.experiments import Results, latest, open_store, results
from arena.errors import ArenaError
from arena.report import data
from arena.results.ranking import Limits


def load_results(store_path: str, name: str | None) -> Results:
    """The experiment ``name`` (default: the store's most recent), refused when it has no runs."""
    with open_store(store_path) as store:
        res = results(store, name or latest(store))
    if not res.runs:
        raise ArenaError(f"experiment {res.name}: no runs in {store_path} yet (arena run it first)")
    return res


def build_report(res: Results, limits: Limits = Limits()) -> data.Report:
    from arena.app.reproduce import comparison_of

    return data.build(res.name, res.definition, res.runs, res.cells, res.observations(), limits,
                      comparison_of(res.definition, res.cells, res.runs, res.file or "(stored definition)"),
                      res.failures)


def default_path(name: str) -> str:
    return f"arena-report-{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}.html"


def write_report(report: data.Report, path: str) -> str:
    """Write the HTML file; returns its absolute path."""
    from arena.report.html import render

    text = render(report)
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise ArenaError(f"--output {path}: cannot write it ({e.strerror})") from None
    return str(Path(path).resolve())


@dataclass(frozen=True)
class Written:
    name: str
    runs: int
    charts: int
    path: str  # the HTML file, absolute
    exported: list[Path]  # with an export directory: each chart's CSV and picture


def report(store_path: str, name: str | None = None, limits: Limits = Limits(), output: str | None = None,
           export_dir: str | None = None, fmt: str = "svg") -> Written:
    """``arena report``: the experiment's report written as HTML (and its charts as files)."""
    res = load_results(store_path, name)
    built = build_report(res, limits)
    path = write_report(built, output or default_path(res.name))
    files = export_charts(built, export_dir, fmt) if export_dir else []
    return Written(res.name, len(res.runs), len(built.charts), path, files)


def export_charts(report: data.Report, directory: str, fmt: str) -> list[Path]:
    """Each chart's data (CSV) and picture (SVG or PNG) into ``directory``."""
    from arena.report.export import export

    try:
        return export(report.charts, Path(directory), fmt)
    except OSError as e:
        raise ArenaError(f"--export {directory}: cannot write there ({e.strerror})") from None
