"""The store as the commands read it: open one, read an experiment back as typed runs and cells
(``results``), list the experiments, export them (JSON, CSV, HdrHistogram's formats) and bring in
rescued runs. Running an experiment into a store is app/run.py's."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shlex
from datetime import datetime, timezone
from collections.abc import Collection
from dataclasses import dataclass, field

from arena.errors import ArenaError
from arena.plan.stored import StoredExperiment, stored_experiment
from arena.results.aggregate import Cell, aggregate
from arena.results.load_result import decode_hdr
from arena.results.runs import Failure, Run
from arena.results.store import RUN_COLUMNS, Store, read_rescued


def open_store(path: str, write: bool = False, flag: str = "--store") -> Store:
    """The store at ``path``: to read (it must exist, and is never written, not even upgraded), or to
    ``write`` (created where missing; checked writable before anything runs). Errors name ``flag``."""
    if not write and not os.path.exists(path):
        raise ArenaError(f"{flag} {path}".lstrip() + f": no such store (looked for {os.path.abspath(path)}; run an "
                         "experiment first: arena run scenarios/quick.toml, or name the store with --store or ARENA_STORE)")
    return Store(path, readonly=not write, flag=flag)


def import_rescued(path: str, store_path: str) -> tuple[str, int, int]:
    """Bring runs kept in a rescue file (a store that could not be written) into the store at
    ``store_path``. Returns the experiment's name, the rows brought in and the runs already there."""
    doc = read_rescued(path)
    with open_store(store_path, write=True) as store:
        added, already = store.bring_in(doc)
    return doc["experiment"]["name"], added, already


@dataclass(frozen=True)
class Results:
    """One experiment as stored: its definition (decoded once), its runs, and their cells."""

    name: str
    definition: StoredExperiment
    runs: list[Run]
    cells: list[Cell]
    failures: list[Failure] = field(default_factory=list)  # runs whose last attempt could not be made
    steps: list[tuple[str, str]] = field(default_factory=list)  # the latest search's steps: (stage, text)

    def observations(self, leave_out: Collection[tuple[str, str, str]] = frozenset()):
        """The model's observations of the valid runs (model/calibrate.py Observation), but those of
        the cells ``leave_out`` names (label, workload, level: a pathology the model does not know)."""
        from arena.model.observe import observations  # here: reading a store needs no model (nor numpy)

        runs = [r for r in self.runs if (r.label, r.workload, r.level_label) not in leave_out] if leave_out else self.runs
        return observations(runs, self.definition.workloads)


def results(store: Store, name: str) -> Results:
    runs = store.runs(name)
    return Results(name, stored_experiment(name, store.file(name), store.definition(name)), runs, aggregate(runs),
                   store.failures(name), store.steps(name))


def latest(store: Store) -> str:
    """The name of the store's most recently run (or created) experiment."""
    found = store.experiments()
    if not found:
        raise ArenaError(f"--store {store.path}: the store has no experiment")
    return max(found, key=lambda e: e["last_run"] or e["created_at"])["name"]


def experiments(store_path: str) -> list[dict]:
    with open_store(store_path) as store:
        return store.experiments()


def export_histograms(store_path: str, name: str, fmt: str, per: str = "run") -> dict[str, str]:
    """The experiment's latency histograms in HdrHistogram's own formats, for its tools
    (HistogramLogProcessor, the plotters): "hlog", one log of the response-time histograms as
    intervals, ``per`` "run" (its measured window; a comment before it names the run and its
    validity) or "second" (each interval of the run's series, as arena-load recorded it); "hgrm",
    per cell the percentile distribution of its valid runs' histograms merged exactly. Returns
    file name -> text (one file for hlog). Values are microseconds; interval maxima in milliseconds."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogWriter

    with open_store(store_path) as store:
        runs = store.runs(name, "whole" if fmt == "hlog" else "summary")  # hlog: each window's start and second
    kept = [r for r in runs if r.load and r.load.measured.response_time and r.load.measured.response_time.hdr]
    if not kept:
        raise ArenaError(f"experiment {name}: no run has a latency histogram to export (arena-load records them)")
    if fmt == "hlog":
        # (run, [(start, end, histogram)]) in the order the runs were made
        logged: list[tuple[Run, list[tuple[float, float, HdrHistogram]]]] = []
        for r in kept:
            start = _window_start(r)
            if per == "run":
                logged.append((r, [(start, start + r.load.measured.duration_s, r.load.measured.response_time.decode())]))
            else:
                step = r.load.settings.interval_s
                points = [p for p in r.load.series if p.hdr and p.completed]
                logged.append((r, [(start + p.t, start + p.t + step, decode_hdr(p.hdr)) for p in points]))
        if not any(intervals for _, intervals in logged):
            raise ArenaError(f"experiment {name}: no run has per-second histograms (runs measured before "
                             "arena-load kept each second's histogram); use --per run")
        buf = io.StringIO()
        log = HistogramLogWriter(buf)
        # the log's StartTime, in whole milliseconds and never after its first interval (a reader
        # skips an interval that starts before it)
        start = math.floor(min(intervals[0][0] for _, intervals in logged if intervals) * 1000) / 1000
        buf.write(f"#[Arena experiment {name}: response time of each {per}, microseconds; maxima in ms]\n")
        buf.write(f"#[StartTime: {start:.3f} (seconds since epoch), "
                  f"{datetime.fromtimestamp(start, timezone.utc).isoformat(timespec='seconds')}]\n")
        log.output_log_format_version()
        log.output_legend()
        for r, intervals in sorted(logged, key=lambda ri: ri[1][0][0] if ri[1] else 0.0):
            if not intervals:
                continue
            log.output_comment(f"run: {r.run_key}; valid: {'yes' if r.valid else 'no: ' + '; '.join(r.flags)}")
            for begin, end, h in intervals:
                log.output_interval_histogram(h, begin, end, 1000.0)
        return {f"{name}.hlog": buf.getvalue()}
    out = {}
    for c in aggregate(runs):
        merged = None
        for r in c.valid_runs:
            h = r.load.measured.response_time if r.load else None
            if h is not None and h.hdr:
                if merged is None:
                    merged = h.decode()
                else:
                    merged.add(h.decode())
        if merged is None:
            continue
        text = io.BytesIO()
        merged.output_percentile_distribution(text, 1000.0)  # values in ms, as the tools print them
        # hdrh (0.10) leaves the footer's standard deviation unscaled (microseconds beside a mean in ms)
        fixed = re.sub(r"StdDeviation   = +[0-9.]+",
                       lambda m: f"StdDeviation   = {merged.get_stddev() / 1000.0:12.{merged.significant_figures}f}",
                       text.getvalue().decode())
        slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{c.label} {c.workload} {c.level_label}")
        out[f"{slug}.hgrm"] = fixed
    return out


def _window_start(r: Run) -> float:
    """When a run's measured window began (seconds since the epoch): arena-load's own start (the
    runner's where the tool did not say it), after the warm-up."""
    began = (r.load.raw or {}).get("started_at") or r.started_at
    return began + (r.load.warmup.duration_s if r.load.warmup else 0.0)


def _csv_value(column: str, v):
    """A run's value as a CSV cell: documents (the flags) as JSON, times as ISO 8601
    UTC, a whole level as a whole number (16, not 16.0)."""
    if column == "started_at" and v is not None:
        return datetime.fromtimestamp(v, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v)
    if column == "level" and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


SPREAD = ("launch", "topology")  # the documents whose every value is a CSV column of its own


def _spread(prefix: str, v, out: dict) -> None:
    """A document's values as dotted columns (launch.env.RACK_ENV, launch.settings.preload): the
    command line as one shell line (launch.argv), other lists as JSON."""
    if isinstance(v, dict):
        for k, x in v.items():
            _spread(f"{prefix}.{k}", x, out)
    elif isinstance(v, (list, tuple)):
        out[prefix] = shlex.join(map(str, v)) if prefix == "launch.argv" else json.dumps(v)
    else:
        out[prefix] = json.dumps(v) if isinstance(v, bool) else v


def export(store_path: str, name: str, fmt: str) -> str:
    """The experiment's runs as JSON (every run whole, as stored) or CSV (one flat row per run: the
    launch and topology spread over columns of their own, the other documents as JSON, its start as
    an ISO 8601 time)."""
    with open_store(store_path) as store:
        runs, failures = store.runs(name, "whole" if fmt == "json" else "none"), store.failures(name)
    if fmt == "json":  # a failure: its own fields, "failed": true, no figures
        return json.dumps([r.to_json() for r in runs] + [{**f.to_json(), "failed": True} for f in failures], indent=1)
    flat = [c for c in RUN_COLUMNS if c not in ("load", "resources", "environment", "services", *SPREAD)]
    flat.insert(flat.index("cpu_s") + 1, "throttled_ms")  # Run.throttled_ms: a run's figure, not a column
    rows = [r.to_json() for r in runs]
    rows += [{**f.to_json(), "started_at": f.failed_at, "valid": 0, "flags": [f.reason], "flag_kinds": ["the run failed"]} for f in failures]
    spread = []  # a failure: invalid, its reason the flag, no figures
    for d in rows:
        cells: dict = {}
        for doc in SPREAD:
            _spread(doc, d.get(doc) or {}, cells)
        spread.append(cells)
    extra = sorted({k for cells in spread for k in cells})
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["experiment", *flat, *extra])
    for d, cells in zip(rows, spread):
        w.writerow([name, *(_csv_value(c, d.get(c)) for c in flat), *(cells.get(k) for k in extra)])
    return buf.getvalue()
