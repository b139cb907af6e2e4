"""The report's charts as data: stored runs in, chart specifications out. Pure (no I/O).

A ``Chart`` says what to draw, not how: the HTML report (report/html.py) draws it with plotly.js,
the exports (report/export.py) as CSV and with matplotlib as SVG/PNG. Every figure is an
aggregate of *valid* repetitions (medians; 95% t-intervals where there are two or more), except
where a chart is about one run (its time series) or about what went wrong (errors).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from arena import stats
from arena.drivers.result import LoadResult, from_dict
from arena.store import StoredRun

MiB = 1024 * 1024


@dataclass
class Series:
    name: str
    x: list
    y: list
    lo: list | None = None  # confidence band, where known
    hi: list | None = None
    group: str = ""  # charts with groups show one group at a time (a selector)
    axis: str = "y"  # "y" or "y2" (a second y axis on the right)
    style: str = "line"  # "line" | "bar" | "dash" | "dot"
    color: str = ""  # series with the same color key share a color (default: the name)


@dataclass
class Chart:
    id: str
    section: str  # the report section it belongs in (report/html.py SECTIONS)
    title: str
    x_label: str
    y_label: str
    series: list[Series] = field(default_factory=list)
    kind: str = "xy"  # "xy" | "bar" (bars side by side) | "stack" (stacked bars) | "heatmap"
    x_log: bool = False
    y_log: bool = False
    y2_label: str = ""
    note: str = ""
    # heatmap: z[row][column]; rows along y, columns along x; the colour scale's label is y2_label
    z: list[list[float | None]] | None = None
    rows: list[str] | None = None
    columns: list[str] | None = None
    x_ticks: dict[float, str] | None = None  # tick labels at these x values

    @property
    def groups(self) -> list[str]:
        return list(dict.fromkeys(s.group for s in self.series if s.group))

    def points(self) -> int:
        if self.kind == "heatmap":
            return sum(v is not None for row in self.z or [] for v in row)
        return sum(y is not None for s in self.series for y in s.y)


# ---------------------------------------------------------------------- grouping


def level_name(model: str, level: float) -> str:
    return f"c={int(level)}" if model == "closed" else f"{level:g} req/s"


def load_axis(runs: list[StoredRun]) -> str:
    models = {r.model for r in runs}
    return "concurrency (closed model)" if models == {"closed"} else (
        "offered rate, req/s (open model)" if models == {"open"} else "load level")


def workloads(runs: list[StoredRun]) -> list[str]:
    return list(dict.fromkeys(r.workload for r in runs))


def labels(runs: list[StoredRun]) -> list[str]:
    return list(dict.fromkeys(r.label for r in runs))


def _by(runs: list[StoredRun], *keys: str) -> dict[tuple, list[StoredRun]]:
    out: dict[tuple, list[StoredRun]] = {}
    for r in runs:
        out.setdefault(tuple(getattr(r, k) for k in keys), []).append(r)
    return out


def _valid(runs: list[StoredRun]) -> list[StoredRun]:
    return [r for r in runs if r.valid]


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return stats.median(values) if values else None


def top_level(runs: list[StoredRun]) -> float:
    """The highest load level with a valid run (the highest level if none is valid)."""
    return max((r.level for r in runs if r.valid), default=max(r.level for r in runs))


def _title(base: str, workload: str, many: bool) -> str:
    return f"{base} - {workload}" if many else base


def _slug(*parts: str) -> str:
    text = "-".join(parts).lower()
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


# ---------------------------------------------------------------------- the charts


def throughput_vs_load(runs: list[StoredRun], workload: str, many: bool) -> Chart:
    chart = Chart(_slug("throughput", workload), "throughput", _title("Throughput vs load", workload, many), load_axis(runs),
                  "requests/s", note="median of valid repetitions; band: 95% confidence interval (t) where 2+ runs")
    for label in labels(runs):
        xs, ys, lo, hi = [], [], [], []
        for (level,), rs in sorted(_by([r for r in runs if r.label == label], "level").items()):
            tp = [r.throughput for r in _valid(rs)]
            ci = stats.ci95(tp)
            xs.append(level)
            ys.append(_median(tp))
            lo.append(max(0.0, ci[0]) if ci else None)  # throughput is positive: the band stops at 0
            hi.append(ci[1] if ci else None)
        chart.series.append(Series(label, xs, ys, lo, hi))
    return chart


def latency_vs_load(runs: list[StoredRun], workload: str, many: bool) -> Chart:
    chart = Chart(_slug("latency", workload), "latency", _title("Latency percentiles vs load", workload, many), load_axis(runs),
                  "latency, ms", y_log=True, note="median over valid repetitions of each run's percentile")
    for pct in ("p50", "p90", "p99"):
        for label in labels(runs):
            xs, ys = [], []
            for (level,), rs in sorted(_by([r for r in runs if r.label == label], "level").items()):
                xs.append(level)
                v = _median([getattr(r, f"{pct}_us") for r in _valid(rs)])
                ys.append(None if v is None else v / 1000)
            chart.series.append(Series(label, xs, ys, group=pct))
    return chart


SPECTRUM = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0]


def spectrum_x(q: float) -> float:
    """HdrHistogram's percentile axis: 1 / (1 - q), so 90%, 99%, 99.9% are evenly spaced on a log scale."""
    return 1 / (1 - q) if q < 1 else 1e6


def percentile_spectrum(runs: list[StoredRun], loads: dict[int, LoadResult], workload: str, many: bool) -> Chart:
    """Per load level (the selector), the latency at each percentile, from the merged histograms
    of the valid repetitions."""
    chart = Chart(_slug("spectrum", workload), "latency", _title("Latency by percentile", workload, many), "percentile",
                  "latency, ms", x_log=True, y_log=True,
                  x_ticks={spectrum_x(q): f"{100 * q:g}%" if q < 1 else "max" for q in SPECTRUM},
                  note="HdrHistogram-style percentile spectrum; repetitions' histograms merged")
    for (model, level), at_level in sorted(_by(runs, "model", "level").items(), key=lambda kv: kv[0][1]):
        for label in labels(runs):
            hists = [loads[r.id].measured.response_time for r in _valid(at_level) if r.label == label]
            merged = _merge([h for h in hists if h is not None and h.count and h.hdr])
            if merged is None:
                continue
            xs = [spectrum_x(q) for q in SPECTRUM]
            ys = [stats.hdr_value_at_quantile(merged, q) / 1000 for q in SPECTRUM]
            chart.series.append(Series(label, xs, ys, group=level_name(model, level)))
    return chart


def _merge(hists):
    if not hists:
        return None
    first = hists[0].decode()
    for h in hists[1:]:
        first.add(h.decode())
    return first


def heatmaps(runs: list[StoredRun], workload: str, many: bool) -> list[Chart]:
    """Processes x threads per server (where either knob varies), at the highest load level with valid runs."""
    charts = []
    for (server,), rs in _by(runs, "server").items():
        procs = sorted({r.processes or 1 for r in rs})
        threads = sorted({r.threads or 1 for r in rs})
        if len(procs) * len(threads) < 2:
            continue
        top = top_level(rs)
        at_top = [r for r in rs if r.level == top]
        level = level_name(at_top[0].model, top)
        for metric, unit, get in (("throughput", "requests/s", lambda r: r.throughput),
                                  ("p99", "p99 latency, ms", lambda r: r.p99_us and r.p99_us / 1000),
                                  ("memory", "PSS, MiB", lambda r: r.pss_bytes and r.pss_bytes / MiB)):
            z = [[_median([get(r) for r in _valid(at_top) if (r.processes or 1) == p and (r.threads or 1) == t])
                  for t in threads] for p in procs]
            charts.append(Chart(_slug("heatmap", server, metric, workload), "heatmap",
                                _title(f"{server}: {metric}, processes x threads at {level}", workload, many),
                                "threads per process", "processes", kind="heatmap", z=z, y2_label=unit,
                                rows=[str(p) for p in procs], columns=[str(t) for t in threads],
                                note="median of valid repetitions; empty cell: not run or no valid run"))
    return charts


def memory(runs: list[StoredRun]) -> list[Chart]:
    by_label = _by(runs, "label")
    names = [label for label, in by_label]
    pss = [_median([r.pss_bytes for r in _valid(rs)]) for rs in by_label.values()]
    uss = [_median([r.uss_bytes for r in _valid(rs)]) for rs in by_label.values()]
    mem = Chart("memory", "memory", "Memory per configuration", "configuration", "MiB", kind="bar",
                note="median over valid runs of the peak over each run's window, summed over the server's processes",
                series=[Series("PSS", names, [v and v / MiB for v in pss], style="bar"),
                        Series("USS", names, [v and v / MiB for v in uss], style="bar")])
    per_gb = []
    for (label, rs), p in zip(by_label.items(), pss):
        best = max((_median([r.throughput for r in _valid(g)]) or 0 for g in _by(rs, "workload", "level").values()),
                   default=0)
        per_gb.append(best / (p / 1024 ** 3) if p and best else None)
    eff = Chart("throughput-per-gb", "memory", "Throughput per GB of memory", "configuration", "requests/s per GB (PSS)",
                kind="bar", series=[Series("req/s per GB", names, per_gb, style="bar")],
                note="the configuration's best median throughput over its load levels / its median PSS")
    return [mem, eff]


DECOMPOSITION = ("queue", "GIL/CPU wait", "CPU", "I/O", "other in app", "outside the app")


def decomposition(server_timing: dict[str, float], response_ms: float) -> dict[str, float | None]:
    """Mean response time split into parts, from mean Server-Timing figures (ms). Pure.

    queue: the request's wait before the app (X-Request-Start to the app's start); GIL/CPU wait:
    cpuwall - cpu (the wall time of the app's CPU sections beyond their CPU time: waiting for the
    GIL/GVL or for a core); CPU; I/O; other in app: app - cpuwall - io; outside the app: the response
    time minus queue and app (network, the server's own work, parsing)."""
    g = server_timing.get
    app, cpu, cpuwall, io = g("app"), g("cpu"), g("cpuwall"), g("io")
    queue = g("queue")
    parts: dict[str, float | None] = dict.fromkeys(DECOMPOSITION)
    parts["queue"] = queue
    if cpu is not None and cpuwall is not None:
        parts["GIL/CPU wait"] = max(0.0, cpuwall - cpu)
        parts["CPU"] = cpu
    parts["I/O"] = io
    if app is not None:
        parts["other in app"] = max(0.0, app - (cpuwall or 0) - (io or 0))
        parts["outside the app"] = max(0.0, response_ms - app - (queue or 0))
    return parts


def latency_decomposition(runs: list[StoredRun], loads: dict[int, LoadResult], workload: str, many: bool) -> Chart:
    chart = Chart(_slug("decomposition", workload), "decomposition", _title("Where the latency went (mean per request)", workload, many),
                  "configuration", "ms", kind="stack",
                  note="means of the Server-Timing figures the app reports and of the response time; "
                       "median over valid repetitions; the selector chooses the load level")
    for (model, level), at_level in sorted(_by(runs, "model", "level").items(), key=lambda kv: kv[0][1]):
        names, rows = [], []
        for (label,), rs in _by(at_level, "label").items():
            parts = []
            for r in _valid(rs):
                m = loads[r.id].measured
                if not m.server_timing or not m.response_time or m.response_time.mean is None:
                    continue
                timing = {k: h.mean / 1000 for k, h in m.server_timing.items() if h.mean is not None}
                parts.append(decomposition(timing, m.response_time.mean / 1000))
            if parts:
                names.append(label)
                rows.append({k: _median([p[k] for p in parts]) for k in DECOMPOSITION})
        for part in DECOMPOSITION:
            chart.series.append(Series(part, names, [row[part] for row in rows], group=level_name(model, level), style="bar"))
    return chart


def balance(runs: list[StoredRun], loads: dict[int, LoadResult], workload: str, many: bool) -> Chart:
    """Share of the requests each worker process answered (from X-Arena-Pid), busiest first, at the
    highest load level with valid runs, summed over its valid repetitions."""
    chart = Chart(_slug("balance", workload), "balance", _title("Requests per worker process", workload, many), "configuration",
                  "share of requests, %", kind="stack",
                  note="each bar is one configuration at its highest load level with valid runs; segments: its "
                       "processes, busiest first")
    shares: dict[str, list[float]] = {}
    for (label,), rs in _by(runs, "label").items():
        top = top_level(rs)
        counts: list[int] = []
        for r in _valid([r for r in rs if r.level == top]):
            per = sorted(loads[r.id].measured.workers.values(), reverse=True)
            counts = [a + b for a, b in _zip_longest(counts, per)]
        if counts and sum(counts):
            shares[label] = [100 * c / sum(counts) for c in counts]
    most = max((len(v) for v in shares.values()), default=0)
    for i in range(most):
        chart.series.append(Series(f"process {i + 1}", list(shares), [v[i] if i < len(v) else None for v in shares.values()],
                                   style="bar"))
    return chart


def _zip_longest(a: list[int], b: list[int]):
    n = max(len(a), len(b))
    return zip(a + [0] * (n - len(a)), b + [0] * (n - len(b)))


def time_series(runs: list[StoredRun], loads: dict[int, LoadResult]) -> Chart:
    """Per run (the selector): requests/s, p99 and errors in each second, so stalls show."""
    chart = Chart("time-series", "time-series", "Per-second time series of a run", "seconds into the measured window", "requests/s",
                  y2_label="p99, ms", note="one run at a time; the selector lists every stored run; whole seconds only")
    for r in sorted(runs, key=lambda r: (r.workload, r.label, r.level, r.repetition)):
        load = loads[r.id]
        # whole intervals only: the last one of a run is cut by its end and would look like a stall
        step = min((b.t - a.t for a, b in zip(load.series, load.series[1:]) if b.t > a.t), default=1.0)
        series = [p for p in load.series if p.t + step <= load.measured.duration_s + 1e-6]
        if not series:
            continue
        name = r.run_key
        t = [p.t for p in series]
        chart.series.append(Series("requests/s", t, [p.completed for p in series], group=name))
        chart.series.append(Series("errors/s", t, [p.errors for p in series], group=name, style="bar"))
        chart.series.append(Series("p99, ms", t, [p.p99_us / 1000 if p.p99_us is not None else None for p in series],
                                   group=name, axis="y2", style="dot"))
    return chart


def errors(runs: list[StoredRun], loads: dict[int, LoadResult]) -> Chart:
    """Errors by class, and responses by non-2xx status, per configuration (all runs, valid or not)."""
    totals: dict[str, dict[str, int]] = {}
    for r in runs:
        m = loads[r.id].measured
        row = totals.setdefault(r.label, {})
        for k, v in m.error_counts.items():
            if v:
                row[k] = row.get(k, 0) + v
        for status, v in m.status.items():
            if not 200 <= status < 300 and v:
                row[f"HTTP {status}"] = row.get(f"HTTP {status}", 0) + v
    kinds = sorted({k for row in totals.values() for k in row})
    names = list(totals)
    chart = Chart("errors", "errors", "Errors by class and status", "configuration", "requests (all runs)", kind="stack",
                  note="transport errors by class and responses with a non-2xx status, summed over every run"
                       + ("" if kinds else "; none in this experiment"))
    chart.series = [Series(k, names, [totals[n].get(k, 0) for n in names], style="bar") for k in kinds]
    if not kinds:  # a chart with a point per configuration: zero errors is a result
        chart.series = [Series("errors", names, [0 for _ in names], style="bar")]
    return chart


def model_vs_measured(points, workload: str, many: bool, axis: str) -> Chart:
    """Measured throughput (solid) and the model's prediction (dashed) per configuration."""
    chart = Chart(_slug("model", workload), "model", _title("Throughput: measured and predicted", workload, many), axis,
                  "requests/s", note="solid: measured (median of valid runs); dashed: the model, calibrated from each "
                                     "server's lowest-load runs only")
    by_label: dict[str, list] = {}
    for pt in points:
        if pt.workload == workload:
            by_label.setdefault(pt.label, []).append(pt)
    for label, pts in by_label.items():
        pts.sort(key=lambda pt: pt.level)
        xs = [pt.level for pt in pts]
        chart.series.append(Series(label, xs, [pt.measured for pt in pts], color=label))
        chart.series.append(Series(f"{label} (model)", xs, [pt.predicted.throughput for pt in pts], style="dash",
                                   color=label))
    return chart


# ---------------------------------------------------------------------- the ranking


@dataclass
class Ranked:
    label: str
    server: str
    workload: str
    level: str
    throughput: float
    p99_ms: float | None
    pss_mib: float | None
    valid: int
    runs: int
    flags: list[str]


def ranking(runs: list[StoredRun], p99_max_ms: float | None = None,
            memory_max_mib: float | None = None) -> tuple[list[Ranked], list[Ranked]]:
    """(best configuration per server, every eligible configuration best first): for each
    configuration its load level of highest median throughput among the levels that keep within the
    limits (median p99 <= p99_max_ms, median PSS <= memory_max_mib)."""
    eligible: list[Ranked] = []
    for (label, workload), rs in _by(runs, "label", "workload").items():
        best = None
        for (model, level), at in _by(rs, "model", "level").items():
            ok = _valid(at)
            tp = _median([r.throughput for r in ok])
            p99 = _median([r.p99_us for r in ok])
            pss = _median([r.pss_bytes for r in ok])
            if tp is None:
                continue
            if p99_max_ms is not None and (p99 is None or p99 / 1000 > p99_max_ms):
                continue
            if memory_max_mib is not None and (pss is None or pss / MiB > memory_max_mib):
                continue
            flags = sorted({f for r in at if not r.valid for f in r.json("flags")})
            cand = Ranked(label, at[0].server, workload, level_name(model, level), tp, p99 and p99 / 1000,
                          pss and pss / MiB, len(ok), len(at), flags)
            if best is None or cand.throughput > best.throughput:
                best = cand
        if best:
            eligible.append(best)
    order = workloads(runs)
    eligible.sort(key=lambda r: (order.index(r.workload), -r.throughput))
    per_server: dict[tuple[str, str], Ranked] = {}
    for r in eligible:
        per_server.setdefault((r.workload, r.server), r)
    return list(per_server.values()), eligible


# ---------------------------------------------------------------------- all of them


def all_charts(runs: list[StoredRun]) -> list[Chart]:
    loads = {r.id: from_dict(r.json("load")) for r in runs}
    charts: list[Chart] = []
    names = workloads(runs)
    many = len(names) > 1
    for w in names:
        rs = [r for r in runs if r.workload == w]
        charts += [throughput_vs_load(rs, w, many), latency_vs_load(rs, w, many),
                   percentile_spectrum(rs, loads, w, many)]
        charts += heatmaps(rs, w, many)
        charts += [latency_decomposition(rs, loads, w, many), balance(rs, loads, w, many)]
    charts += memory(runs)
    charts += [errors(runs, loads), time_series(runs, loads)]
    return charts


def usl_fits(runs: list[StoredRun]) -> list[tuple[str, str, object]]:
    """A Universal Scalability Law fit of throughput against concurrency per configuration and
    workload (closed model, valid runs, at least 4 runs at 3 levels): (label, workload, fit or why not)."""
    from arena.model import usl

    out = []
    for (label, workload), rs in _by([r for r in runs if r.model == "closed" and r.valid], "label", "workload").items():
        try:
            out.append((label, workload, usl.fit([r.level for r in rs], [r.throughput for r in rs])))
        except (ValueError, ArithmeticError) as e:
            out.append((label, workload, str(e)))
    return out


def model_section(runs: list[StoredRun]):
    """The model's predictions against the measurements: (charts, points, calibrations, MAPE, USL fits)."""
    from arena.model.verify import compare, mape

    points, calibrations = compare(runs)
    names = workloads(runs)
    charts = [model_vs_measured(points, w, len(names) > 1, load_axis(runs)) for w in names
              if any(pt.workload == w for pt in points)]
    return charts, points, calibrations, mape(points), usl_fits(runs)


def nice(v: float | None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}g}" if abs(v) < 10 ** digits else f"{v:.0f}"
