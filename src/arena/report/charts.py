"""The report's charts as data: cells in, chart specifications out. Pure (no I/O).

A ``Chart`` says what to draw, not how: the HTML report (report/html.py) draws it with plotly.js,
the exports (report/export.py) as CSV and with matplotlib as SVG/PNG, both in the colours that
report/style.py gave each series. Every figure comes from the aggregation (results/aggregate.py):
medians of *valid* repetitions with an interval of the median, except where a chart is about one
run (its time series) or about what went wrong (errors).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from arena import stats
from arena.results.aggregate import DECOMPOSITION, MiB, Cell, labels, top_level, workloads
from arena.results.runs import Run


@dataclass
class Series:
    name: str
    x: list
    y: list
    lo: list | None = None  # interval band, where known
    hi: list | None = None
    group: str = ""  # charts with groups show one group at a time (a selector)
    axis: str = "y"  # "y" or "y2" (a second y axis on the right)
    style: str = "line"  # "line" | "bar" | "dash" | "dot" (report/style.py LINES)
    color_key: str = ""  # series with the same key share a colour (default: the name)
    color: str = ""  # the colour itself, given by report/style.py paint()


@dataclass
class Chart:
    id: str
    section: str  # the report section it belongs in (report/data.py SECTIONS)
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
    z_range: tuple[float, float] | None = None  # the colour scale's ends (heatmap_range)
    x_ticks: dict[float, str] | None = None  # tick labels at these x values
    opens: str = ""  # the group shown first (default: the first)

    @property
    def groups(self) -> list[str]:
        return list(dict.fromkeys(s.group for s in self.series if s.group))

    @property
    def first_group(self) -> str:
        """The group the chart opens on."""
        groups = self.groups
        return self.opens if self.opens in groups else (groups[0] if groups else "")

    def points(self) -> int:
        if self.kind == "heatmap":
            return sum(v is not None for row in self.z or [] for v in row)
        return sum(y is not None for s in self.series for y in s.y)


# ---------------------------------------------------------------------- helpers


def load_axis(cells: list[Cell]) -> str:
    models = {c.model for c in cells}
    return "concurrency (closed model)" if models == {"closed"} else (
        "offered rate, req/s (open model)" if models == {"open"} else "load level")


def _title(base: str, workload: str, many: bool) -> str:
    return f"{base} - {workload}" if many else base


def _slug(*parts: str) -> str:
    text = "-".join(parts).lower()
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def _of(cells: list[Cell], label: str) -> list[Cell]:
    return sorted((c for c in cells if c.label == label), key=lambda c: c.level)


INTERVAL_NOTE = ("band: 95% interval of the median (order statistics) where 6+ valid repetitions, else the range "
                 "of the repetitions")


# ---------------------------------------------------------------------- the charts


def throughput_vs_load(cells: list[Cell], workload: str, many: bool) -> Chart:
    chart = Chart(_slug("throughput", workload), "throughput", _title("Throughput vs load", workload, many),
                  load_axis(cells), "requests/s", note="median of valid repetitions; " + INTERVAL_NOTE)
    for label in labels(cells):
        mine = _of(cells, label)
        ivs = [c.throughput.interval for c in mine]
        chart.series.append(Series(label, [c.level for c in mine], [c.throughput.median for c in mine],
                                   [iv.lo if iv else None for iv in ivs], [iv.hi if iv else None for iv in ivs]))
    return chart


def latency_vs_load(cells: list[Cell], workload: str, many: bool) -> Chart:
    chart = Chart(_slug("latency", workload), "latency", _title("Latency percentiles vs load", workload, many),
                  load_axis(cells), "latency, ms", y_log=True, note="median over valid repetitions of each run's percentile")
    for pct in ("p50", "p90", "p99"):
        for label in labels(cells):
            mine = _of(cells, label)
            ys = [getattr(c, f"{pct}_us").median for c in mine]
            chart.series.append(Series(label, [c.level for c in mine], [None if v is None else v / 1000 for v in ys],
                                       group=pct))
    chart.opens = "p99"  # the tail is what a latency target is about
    return chart


SPECTRUM = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0]


def spectrum_x(q: float) -> float:
    """HdrHistogram's percentile axis: 1 / (1 - q), so 90%, 99%, 99.9% are evenly spaced on a log scale."""
    return 1 / (1 - q) if q < 1 else 1e6


def percentile_spectrum(cells: list[Cell], workload: str, many: bool) -> Chart:
    """Per load level (the selector), the latency at each percentile, from the merged histograms
    of the valid repetitions."""
    chart = Chart(_slug("spectrum", workload), "latency", _title("Latency by percentile", workload, many), "percentile",
                  "latency, ms", x_log=True, y_log=True,
                  x_ticks={spectrum_x(q): f"{100 * q:g}%" if q < 1 else "max" for q in SPECTRUM},
                  note="HdrHistogram-style percentile spectrum; repetitions' histograms merged")
    for c in sorted(cells, key=lambda c: c.level):
        hists = [r.load.measured.response_time for r in c.valid_runs]
        merged = _merge([h for h in hists if h is not None and h.count and h.hdr])
        if merged is None:
            continue
        xs = [spectrum_x(q) for q in SPECTRUM]
        ys = [stats.hdr_value_at_quantile(merged, q) / 1000 for q in SPECTRUM]
        chart.series.append(Series(c.label, xs, ys, group=c.level_label))
    order = {lv: i for i, lv in enumerate(dict.fromkeys(c.level_label for c in sorted(cells, key=lambda c: c.level)))}
    chart.series.sort(key=lambda s: (order[s.group], labels(cells).index(s.name)))
    chart.opens = chart.groups[-1] if chart.groups else ""  # the highest level: where the configurations differ
    return chart


def _merge(hists):
    if not hists:
        return None
    first = hists[0].decode()
    for h in hists[1:]:
        first.add(h.decode())
    return first


NOISE_FLOOR = 0.05  # run-to-run differences of a few percent are common on a shared machine


def heatmap_range(z: list[list[float | None]], widths: list[float]) -> tuple[float, float] | None:
    """The ends of a heatmap's colour scale: the cells' lowest and highest value, widened
    symmetrically so that the scale spans at least the widest interval (or range) of any cell's
    median and at least NOISE_FLOOR of the highest value (two repetitions' range understates the
    noise). So cells that differ by less than the noise get neighbouring colours, never the scale's
    opposite ends. None for an empty grid."""
    values = [v for row in z for v in row if v is not None]
    if not values:
        return None
    lo, hi = min(values), max(values)
    noise = max(max(widths, default=0.0), NOISE_FLOOR * max(abs(lo), abs(hi)))
    if hi - lo < noise:
        mid = (lo + hi) / 2
        lo, hi = mid - noise / 2, mid + noise / 2
        if min(values) >= 0:  # a positive quantity's scale does not start below 0
            lo, hi = max(0.0, lo), max(0.0, lo) + noise
    return lo, hi


def heatmaps(cells: list[Cell], workload: str, many: bool) -> list[Chart]:
    """Processes x threads per server (where either knob varies), at the highest load level with valid runs."""
    charts = []
    for server in dict.fromkeys(c.server for c in cells):
        mine = [c for c in cells if c.server == server]
        procs = sorted({c.processes or 1 for c in mine})
        threads = sorted({c.threads or 1 for c in mine})
        if len(procs) * len(threads) < 2:
            continue
        top = top_level(mine)
        at_top = [c for c in mine if c.level == top]
        level = at_top[0].level_label
        for metric, unit, get in (("throughput", "requests/s", lambda c: c.throughput),
                                  ("p99", "p99 latency, ms", lambda c: c.p99_us.scaled(1000)),
                                  ("memory", "PSS, MiB", lambda c: c.pss_bytes.scaled(MiB))):
            at = {((c.processes or 1), (c.threads or 1)): get(c) for c in at_top}
            if len(procs) < 2 or len(threads) < 2:  # a line, not a grid: bars say it plainly
                knob, values = ("processes", procs) if len(procs) > 1 else ("threads per process", threads)
                keys = [(v, threads[0]) if len(procs) > 1 else (procs[0], v) for v in values]
                charts.append(Chart(_slug("heatmap", server, metric, workload), "heatmap",
                                    _title(f"{server}: {metric} by {knob} at {level}", workload, many), knob, unit,
                                    [Series(server, [str(v) for v in values],
                                            [at[k].median if k in at else None for k in keys], style="bar")],
                                    kind="bar", note="median of valid repetitions; no bar: not run or no valid run"))
                continue
            z = [[at[(p, t)].median if (p, t) in at else None for t in threads] for p in procs]
            widths = [f.interval.hi - f.interval.lo for f in at.values() if f.interval is not None]
            charts.append(Chart(_slug("heatmap", server, metric, workload), "heatmap",
                                _title(f"{server}: {metric}, processes x threads at {level}", workload, many),
                                "threads per process", "processes", kind="heatmap", z=z, y2_label=unit,
                                rows=[str(p) for p in procs], columns=[str(t) for t in threads],
                                z_range=heatmap_range(z, widths),
                                note="median of valid repetitions; empty cell: not run or no valid run; the colour "
                                     "scale spans at least the widest interval of a cell and 5% of the highest value, "
                                     "so differences inside the noise get neighbouring colours"))
    return charts


def memory(cells: list[Cell]) -> list[Chart]:
    names = labels(cells)
    by_label = {n: [c for c in cells if c.label == n] for n in names}
    # a configuration's memory: the median over all its valid runs (every workload and level)
    from arena.results.aggregate import Figure

    pss = [Figure.of([r.pss_bytes or None for c in cs for r in c.valid_runs]).median for cs in by_label.values()]
    uss = [Figure.of([r.uss_bytes or None for c in cs for r in c.valid_runs]).median for cs in by_label.values()]
    mem = Chart("memory", "memory", "Memory per configuration", "configuration", "MiB", kind="bar",
                note="median over valid runs of the peak over each run's window, summed over the server's processes",
                series=[Series("PSS", names, [v and v / MiB for v in pss], style="bar"),
                        Series("USS", names, [v and v / MiB for v in uss], style="bar")])
    per_gb = []
    for cs, p in zip(by_label.values(), pss):
        best = max((c.throughput.median or 0 for c in cs), default=0)
        per_gb.append(best / (p / 1024 ** 3) if p and best else None)
    eff = Chart("throughput-per-gb", "memory", "Throughput per GB of memory", "configuration", "requests/s per GB (PSS)",
                kind="bar", series=[Series("req/s per GB", names, per_gb, style="bar")],
                note="the configuration's best median throughput over its load levels / its median PSS")
    return [mem, eff]


def latency_decomposition(cells: list[Cell], workload: str, many: bool) -> Chart:
    chart = Chart(_slug("decomposition", workload), "decomposition",
                  _title("Where the latency went (mean per request)", workload, many), "configuration", "ms", kind="stack",
                  note="means of the Server-Timing figures the app reports and of the response time; "
                       "median over valid repetitions; the selector chooses the load level")
    for level in sorted({(c.level, c.level_label) for c in cells}):
        at = [c for c in cells if c.level == level[0] and c.decomposition]
        for part in DECOMPOSITION:
            values = [c.decomposition[part] for c in at]
            if any(v is not None for v in values):  # a part no app reports stays out of the legend
                chart.series.append(Series(part, [c.label for c in at], values, group=level[1], style="bar"))
    return chart


def cpu_by_group(cells: list[Cell], workload: str, many: bool) -> Chart | None:
    """Cores busy per configuration, the server's and each service's stacked (None without services)."""
    kinds = list(dict.fromkeys(k for c in cells for k in c.service_cores))
    if not kinds:
        return None
    chart = Chart(_slug("cpu", workload), "cpu", _title("CPU: the server and its services", workload, many),
                  "configuration", "cores busy", kind="stack",
                  note="median over valid repetitions of the cores each cgroup kept busy over the measured window; "
                       "the selector chooses the load level")
    for level in sorted({(c.level, c.level_label) for c in cells}):
        at = [c for c in cells if c.level == level[0] and c.valid]
        names = [c.label for c in at]
        chart.series.append(Series("server", names, [c.cpu_cores.median for c in at], group=level[1], style="bar"))
        for k in kinds:
            chart.series.append(Series(k, names, [c.service_cores[k].median if k in c.service_cores else None for c in at],
                                       group=level[1], style="bar"))
    return chart


def balance(cells: list[Cell], workload: str, many: bool) -> Chart:
    """Share of the requests each worker process answered (from X-Arena-Pid), busiest first, at the
    highest load level with valid runs, summed over its valid repetitions."""
    chart = Chart(_slug("balance", workload), "balance", _title("Requests per worker process", workload, many),
                  "configuration", "share of requests, %", kind="stack",
                  note="each bar is one configuration at its highest load level with valid runs; segments: its "
                       "processes, busiest first")
    shares: dict[str, tuple[float, ...]] = {}
    for label in labels(cells):
        mine = [c for c in cells if c.label == label]
        top = next(c for c in mine if c.level == top_level(mine))
        if top.balance:
            shares[label] = top.balance
    most = max((len(v) for v in shares.values()), default=0)
    for i in range(most):
        chart.series.append(Series(f"process {i + 1}", list(shares), [v[i] if i < len(v) else None for v in shares.values()],
                                   style="bar"))
    return chart


SERIES_RUNS = 5  # the runs of a cell the time series offers: its first repetitions


def time_series(runs: list[Run]) -> Chart:
    """Per run (the selector): requests/s, p99 and errors in each second, so stalls show; the first
    SERIES_RUNS repetitions of each cell (a store of thousands of runs would make a selector no one
    reads, and a page of hundreds of megabytes)."""
    offered, seen = [], Counter()
    for r in sorted(runs, key=lambda r: (r.workload, r.label, r.level, r.repetition)):
        seen[r.cell] += 1
        if seen[r.cell] <= SERIES_RUNS:
            offered.append(r)
    every = len(offered) == len(runs)
    chart = Chart("time-series", "time-series", "Per-second time series of a run", "seconds into the measured window",
                  "requests/s", y2_label="p99, ms",
                  note=f"one run at a time; the selector lists {'every stored run' if every else f'the first {SERIES_RUNS} runs of each cell'}; "
                       "whole seconds only")
    for r in offered:
        series = r.load.whole_intervals
        if not series:
            continue
        name = r.run_key
        t = [p.t for p in series]
        chart.series.append(Series("requests/s", t, [p.completed for p in series], group=name))
        chart.series.append(Series("errors/s", t, [p.errors for p in series], group=name, style="bar"))
        chart.series.append(Series("p99, ms", t, [p.p99_us / 1000 if p.p99_us is not None else None for p in series],
                                   group=name, axis="y2", style="dot"))
    return chart


def soak_memory(soaks) -> Chart | None:
    """A soak's memory against requests, per worker (results/soak.py): each worker's PSS at each
    sample against the requests it had served by then, one soak at a time (the selector)."""
    chart = Chart("soak-memory", "soak", "Memory against requests served, per worker", "requests the worker had served",
                  "PSS, MiB", note="one soak at a time; each line a worker process (pid), each point a sample")
    for s in soaks:
        group = f"{s.label} at {s.level}"
        for w in s.workers:
            chart.series.append(Series(f"pid {w.pid}", [x for x, _ in w.points], [y for _, y in w.points], group=group))
    return chart if chart.series else None


def errors(runs: list[Run]) -> Chart | None:
    """Errors by class, and responses by non-2xx status, per configuration (all runs, valid or not);
    None when there was none (the report says so in a sentence)."""
    totals: dict[str, dict[str, int]] = {}
    for r in runs:
        m = r.load.measured
        row = totals.setdefault(r.label, {})
        for k, v in m.error_counts.items():
            if v:
                row[k] = row.get(k, 0) + v
        for status, v in m.status.items():
            if not 200 <= status < 300 and v:
                row[f"HTTP {status}"] = row.get(f"HTTP {status}", 0) + v
    kinds = sorted({k for row in totals.values() for k in row})
    names = list(totals)
    if not kinds:
        return None
    chart = Chart("errors", "errors", "Errors by class and status", "configuration", "requests (all runs)", kind="stack",
                  note="transport errors by class and responses with a non-2xx status, summed over every run")
    chart.series = [Series(k, names, [totals[n].get(k, 0) for n in names], style="bar") for k in kinds]
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
        chart.series.append(Series(label, xs, [pt.measured for pt in pts], color_key=label))
        chart.series.append(Series(f"{label} (model)", xs, [pt.predicted.throughput for pt in pts], style="dash",
                                   color_key=label))
    return chart


def p99_model_vs_measured(points, workload: str, many: bool, axis: str) -> Chart | None:
    """Measured p99 (solid), the mean-value model's (dashed) and the simulator's (dotted, with its
    95% interval over replications) per configuration; None where nothing was simulated."""
    chart = Chart(_slug("model-p99", workload), "model", _title("p99: measured, predicted and simulated", workload, many),
                  axis, "p99 ms", y_log=True,
                  note="solid: measured (median of valid runs); dashed: the mean-value model; dotted: the simulator "
                       "(band: 95% interval of its replications); both calibrated from each server's lowest-load runs")
    by_label: dict[str, list] = {}
    for pt in points:
        if pt.workload == workload and pt.simulated is not None and pt.measured_p99_ms:
            by_label.setdefault(pt.label, []).append(pt)
    for label, pts in by_label.items():
        pts.sort(key=lambda pt: pt.level)
        xs = [pt.level for pt in pts]
        finite = lambda v: v if math.isfinite(v) else None  # noqa: E731  (an overloaded open level)
        chart.series.append(Series(label, xs, [pt.measured_p99_ms for pt in pts], color_key=label))
        chart.series.append(Series(f"{label} (model)", xs, [finite(pt.predicted.p99_ms) for pt in pts], style="dash",
                                   color_key=label))
        chart.series.append(Series(f"{label} (simulated)", xs, [finite(pt.simulated.prediction.p99_ms) for pt in pts],
                                   lo=[finite(pt.simulated.p99_lo_ms) for pt in pts],
                                   hi=[finite(pt.simulated.p99_hi_ms) for pt in pts], style="dot", color_key=label))
    return chart if chart.series else None


def all_charts(cells: list[Cell], runs: list[Run], shown: set[str] | None = None) -> list[Chart]:
    """Every chart of the report: of the configurations ``shown`` (None: every one), the heatmaps of
    every one (a processes x threads grid is read whole, and stays one chart however large)."""
    charts: list[Chart] = []
    names = workloads(cells)
    many = len(names) > 1
    grid = cells
    if shown is not None:
        cells, runs = [c for c in cells if c.config in shown], [r for r in runs if r.config in shown]
    for w in names:
        cs = [c for c in cells if c.workload == w]
        charts += [throughput_vs_load(cs, w, many), latency_vs_load(cs, w, many), percentile_spectrum(cs, w, many)]
        charts += heatmaps([c for c in grid if c.workload == w], w, many)
        charts += [latency_decomposition(cs, w, many)]
        charts += [c for c in (cpu_by_group(cs, w, many),) if c is not None]
        charts.append(balance(cs, w, many))
    charts += memory(cells)
    charts += [errors(runs), time_series(runs)]
    return [c for c in charts if c is not None and c.points()]  # no chart without data


def tuning_path(runs: list[Run], p99_max_ms: float | None) -> list[Chart]:
    """A search's runs in the order they ran (arena tune, find = "capacity"): the open rate each
    configuration was tried at, and the p99 each run measured against the target. Runs at a closed
    load (calibration, the saturation run a capacity search starts from) are in the steps, not here."""
    tried = [(i, r) for i, r in enumerate(runs, 1) if r.model == "open"]
    if not tried:
        return []
    rates = Chart("tuning-rates", "tuning", "Rates tried, in order", "run (in the order they ran)",
                  "offered rate, req/s", note="Each configuration's line joins its runs: the race at a common "
                  "rate, then each finalist's bracket closing in on its capacity.")
    p99 = Chart("tuning-p99", "tuning", "p99 of each run against the target", "run (in the order they ran)",
                "p99, ms", y_log=True, note="Runs above the target's line are beyond the goal (invalid runs: no point).")
    for label in dict.fromkeys(r.label for _, r in tried):
        mine = [(i, r) for i, r in tried if r.label == label]
        rates.series.append(Series(label, [i for i, _ in mine], [r.level for _, r in mine], style="dot"))
        p99.series.append(Series(label, [i for i, _ in mine],
                                 [r.p99_us / 1000 if r.valid and r.p99_us else None for _, r in mine], style="dot"))
    if p99_max_ms is not None:
        p99.series.append(Series("p99 target", [tried[0][0], tried[-1][0]], [p99_max_ms, p99_max_ms], style="dash",
                                 color_key="target"))
    return [rates, p99]


def nice(v: float | None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}g}" if abs(v) < 10 ** digits else f"{v:.0f}"


def published_vs_here(comparison) -> list[Chart]:
    """Per figure a study published: the published value, the one measured here and the model's for
    the original conditions, side by side per published row (one group per published workload)."""
    from arena.results.published import FIGURES

    compared = [ln for ln in comparison.lines if ln.run_here]
    names = [n for n in FIGURES if any(n in ln.published for ln in compared)]
    cores = comparison.reproduction.cores
    charts = []
    for name in names:
        heading, unit = FIGURES[name]
        rows = [ln for ln in compared if name in ln.published]
        groups = list(dict.fromkeys(ln.row.workload or "" for ln in rows))
        chart = Chart(_slug("published", name), "published", f"{heading}: published, here, and the model for the original",
                      "published configuration", f"{heading} {unit}".strip() if name != "completed" else "completed (1: yes)",
                      kind="bar", note=f"published: {comparison.study.title}; here: the median of valid runs; model: the "
                                       f"mean-value model on the original's {cores} cores with its work per request")
        for g in groups:
            at = [ln for ln in rows if (ln.row.workload or "") == g]
            xs = [f"{ln.row.key} c={ln.row.concurrency}" for ln in at]
            group = g if len(groups) > 1 else ""
            chart.series += [
                Series("published", xs, [ln.published[name] for ln in at], group=group, style="bar"),
                Series("here", xs, [ln.measured.get(name) for ln in at], group=group, style="bar"),
                Series(f"model ({cores} cores)", xs, [ln.model.get(name) for ln in at], group=group, style="bar"),
            ]
        charts.append(chart)
    return charts
