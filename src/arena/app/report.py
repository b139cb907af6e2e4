"""The report of an experiment: built as data, written as HTML, exported as CSV and pictures."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from arena.app.storage import Results, latest, open_store, results
from arena.atomic import staging, writable, write_file
from arena.errors import ArenaError
from arena.report import data
from arena.app.analysis import GoalFlags, analyse


def load_results(store_path: str, name: str | None) -> Results:
    """The experiment ``name`` (default: the store's most recent), refused when it has no runs."""
    with open_store(store_path) as store:
        res = results(store, name or latest(store))
    if not res.runs:
        raise ArenaError(f"experiment {res.name}: no runs in {store_path} yet (arena run it first)")
    return res


def build_report(res: Results, flags: GoalFlags = GoalFlags(), top: int = data.TOP) -> data.Report:
    """The report, its charts drawing the ``top`` best configurations and each server's best (every
    configuration stays in its tables); the model simulates those it charts."""
    analysis = analyse(res, flags)
    shown = data.charted(analysis.answers, res.cells, top)
    comparison = None
    if res.definition.reproduces:  # the study's comparison (and the runner it imports) only where it is one
        from arena.app.reproduce import comparison_of

        comparison = comparison_of(res.definition, res.cells, res.runs)
    return data.build(res.name, res.definition, res.runs, res.cells, analysis.findings(shown), analysis.answers,
                      comparison, analysis.thresholds, res.steps, analysis.capacities, shown, analysis.soaks, analysis.why)


def default_path(name: str) -> str:
    return f"arena-report-{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}.html"


def exportable(directory: str) -> None:
    """Before any work: ``directory`` exists (or is made now) and takes writes."""
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ArenaError(f"--export {directory}: cannot make it ({e.strerror})") from None
    if not os.access(directory, os.W_OK):
        raise ArenaError(f"--export {directory}: cannot be written")


def write_report(report: data.Report, path: str) -> str:
    """Write the HTML file whole or not at all (arena.atomic: a full disk leaves no half page);
    returns its absolute path."""
    from arena.report.html import render

    write_file(path, render(report), "--output")
    return str(Path(path).resolve())


@dataclass(frozen=True)
class Written:
    name: str
    runs: int
    charts: int
    path: str  # the HTML file, absolute
    exported: list[Path]  # with an export directory: each chart's CSV and picture


def report(store_path: str, name: str | None = None, flags: GoalFlags = GoalFlags(), output: str | None = None,
           export_dir: str | None = None, fmt: str = "svg", top: int = data.TOP) -> Written:
    """``arena report``: the experiment's report written as HTML (and its charts as files)."""
    if output:
        writable(output, "--output")
    if export_dir:
        exportable(export_dir)
    res = load_results(store_path, name)
    built = build_report(res, flags, top)
    path = write_report(built, output or default_path(res.name))
    files = export_charts(built, export_dir, fmt) if export_dir else []
    return Written(res.name, len(res.runs), len(built.charts), path, files)


def export_charts(report: data.Report, directory: str, fmt: str) -> list[Path]:
    """Each chart's data (CSV) and picture (SVG or PNG) into ``directory``."""
    from arena.report.export import export

    with staging(directory, "--export") as stage:
        try:
            written = export(report.charts, stage, fmt)
        except OSError as e:
            raise ArenaError(f"--export {directory}: cannot write there ({e.strerror})") from None
    return [Path(directory) / p.name for p in written]
