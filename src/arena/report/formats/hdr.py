"""HdrHistogram's own formats, for its tools (HistogramLogProcessor, the plotters): ``arena export``'s
hlog (every run's response-time histogram as a log of intervals) and hgrm (each cell's merged
histogram as a percentile distribution, a file each). Formats only: the runs come in the view."""

from __future__ import annotations

import io
import math
import re
from datetime import datetime, timezone

from arena.errors import ArenaError
from arena.report.formats.registry import ExportView, Format, register
from arena.results.aggregate import aggregate
from arena.results.load_result import decode_hdr
from arena.results.runs import Run


def _histograms(v: ExportView, fmt: str) -> dict[str, str]:
    """The experiment's latency histograms in HdrHistogram's own formats, for its tools
    (HistogramLogProcessor, the plotters): "hlog", one log of the response-time histograms as
    intervals, ``per`` "run" (its measured window; a comment before it names the run and its
    validity) or "second" (each interval of the run's series, as arena-load recorded it); "hgrm",
    per cell the percentile distribution of its valid runs' histograms merged exactly. Returns
    file name -> text (one file for hlog). Values are microseconds; interval maxima in milliseconds."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogWriter

    name, per = v.name, v.per
    runs, _ = v.read("whole" if fmt == "hlog" else "summary")  # hlog: each window's start and second
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


register(Format("hlog", "every run's latency histogram as an HdrHistogram log (--per run or second)",
                {"export": lambda v: _histograms(v, "hlog")}))
register(Format("hgrm", "each cell's merged histogram as a percentile distribution (one file per cell: -o DIR)",
                {"export": lambda v: _histograms(v, "hgrm")}, many=True))
