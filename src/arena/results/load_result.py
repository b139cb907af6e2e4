"""LoadResult: what any load driver returns. Fields a tool cannot give are None, never invented.

Times are microseconds. Histograms keep HdrHistogram's compressed encoding (``hdr``) so they can
be decoded and merged later (:meth:`Histogram.decode`); percentiles are precomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from arena.results.run_setup import LoadSettings
from arena.stats import median

# Transport errors, and two more: "status" (an answer whose status is not expected: by default
# anything but 2xx and 3xx) and "local" (a connection the generator could not open on its side).
ERROR_CLASSES = ("refused", "connect_timeout", "reset", "response_timeout", "malformed", "status", "local")
# Classes arena-load reports only where they can occur: capture, with a mix of sessions; short, with
# streams of server-sent events and the events they should hold.
OCCASIONAL_ERROR_CLASSES = ("capture", "short")
# The precomputed percentiles of a Histogram, by name (as arena-load's output.rs PERCENTILES).
PERCENTILES = (("50", 0.5), ("75", 0.75), ("90", 0.9), ("95", 0.95), ("99", 0.99), ("99.9", 0.999),
               ("99.99", 0.9999), ("100", 1.0))


@dataclass(frozen=True)
class Histogram:
    count: int
    min: int | None
    max: int | None
    mean: float | None
    stdev: float | None
    percentiles: dict[str, int]
    hdr: str | None = None

    def p(self, q: str) -> int | None:
        """Percentile by name: "50", "99", "99.9", "100"."""
        return self.percentiles.get(q)

    def decode(self):
        """The full histogram (hdrh.histogram.HdrHistogram), or None without an encoding."""
        return decode_hdr(self.hdr)

    @classmethod
    def of_hdr(cls, h) -> "Histogram":
        """The summary and encoding of an hdrh HdrHistogram."""
        from arena.stats import hdr_quantiles

        n = h.get_total_count()
        if not n:
            return cls(0, None, None, None, None, {}, None)
        qs = hdr_quantiles(h, [q for _, q in PERCENTILES])
        return cls(n, h.get_min_value(), h.get_max_value(), h.get_mean_value(), h.get_stddev(),
                   {k: v for (k, _), v in zip(PERCENTILES, qs)}, h.encode().decode())  # encode() is base64 already

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Histogram":
        return cls(d["count"], d["min"], d["max"], d["mean"], d["stdev"], dict(d["percentiles"]), d.get("hdr"))


@dataclass(frozen=True)
class Streams:
    """A phase's streams of server-sent events (arena-load's ``streams``): those answered in full,
    their events, times from the intended send to the first byte, first event and last event, the
    gaps between events as they arrived, and the other answers' response times apart."""

    count: int
    events: int
    first_byte: Histogram
    first_event: Histogram
    event_gap: Histogram
    last_event: Histogram
    others_response_time: Histogram  # the phase's other answers (not streams), apart

    @classmethod
    def of(cls, d: dict[str, Any] | None, hist: Callable[[dict], Histogram]) -> "Streams | None":
        if d is None:
            return None
        return cls(d["count"], d["events"], *(hist(d[k]) for k in ("first_byte", "first_event", "event_gap", "last_event",
                                                                     "others_response_time")))


@dataclass(frozen=True)
class Phase:
    duration_s: float
    issued: int | None
    sent: int | None
    completed: int
    errors: int
    unsent: int | None
    in_flight: int | None
    offered_rps: float | None
    achieved_rps: float
    status: dict[int, int]
    error_counts: dict[str, int]
    workers: dict[int, int]
    bytes_sent: int | None
    bytes_received: int | None
    response_time: Histogram | None
    service_time: Histogram | None
    connect_time: Histogram | None
    send_lag: Histogram | None
    server_timing: dict[str, Histogram] = field(default_factory=dict)  # by metric name, each one the server sent
    server_timing_dropped: int = 0  # values of names past arena-load's bound on distinct names
    streams: Streams | None = None  # where any answer was a stream of server-sent events


def decode_hdr(hdr: str | None):
    """An encoded histogram (HdrHistogram's compressed form) as hdrh's HdrHistogram, or None."""
    if not hdr:
        return None
    from hdrh.histogram import HdrHistogram

    return HdrHistogram.decode(hdr)


@dataclass(frozen=True)
class SeriesPoint:
    t: float
    sent: int | None
    completed: int
    errors: int
    p50_us: int | None
    p90_us: int | None
    p99_us: int | None
    max_us: int | None
    hdr: str | None = None  # the interval's response-time histogram, encoded (arena-load; None before it)
    workers: dict[int, int] | None = None  # its completions per server process (pid), where the server names them

    @classmethod
    def of(cls, d: dict[str, Any]) -> "SeriesPoint":
        """A point as arena-load writes it, or as stored: its pids (JSON's string keys) as numbers."""
        workers = d.get("workers")
        return cls(**{**d, "workers": {int(pid): n for pid, n in workers.items()} if workers else None})

    def histogram(self) -> Histogram | None:
        """The interval's response times as a Histogram, or None without an encoding."""
        h = decode_hdr(self.hdr)
        return None if h is None else Histogram.of_hdr(h)


@dataclass(frozen=True)
class LoadResult:
    tool: str
    tool_version: str | None
    model: str  # "open" | "closed"
    url: str
    connections: int | None
    rate: float | None
    interrupted: bool
    measured: Phase
    warmup: Phase | None
    series: list[SeriesPoint]
    generator_cpu_s: float | None
    generator_utilization: float | None
    cpu_per_request_us: float | None
    schedule_lag: Histogram | None
    saturated: bool | None
    saturation_reasons: list[str]
    config: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] | None = field(default=None, repr=False)  # the tool's own document, if any
    open_failure: str | None = None  # why the generator could not open every connection, if so
    generator_paused_ms: float | None = None  # the longest the generator itself did not run (arena-load)
    generator_pause_limit_ms: float | None = None  # the pause beyond which the generator counts itself saturated
    hosts: list[dict[str, Any]] = field(default_factory=list)  # several load hosts: each one's figures (combine.py)
    connection_spread: ConnectionSpread | None = None  # kept-alive connections side by side (arena-load)

    @property
    def settings(self) -> LoadSettings:
        """What the tool was asked to do (``config``), read by attribute."""
        return LoadSettings.of(self.config)

    @property
    def whole_intervals(self) -> list[SeriesPoint]:
        """The series points whose interval lies inside the measured window (the last one, cut by
        the end, and the drain after it are left out: they would look like a stall)."""
        window, step = self.measured.duration_s, self.settings.interval_s
        return [p for p in self.series if p.t + step <= window + 1e-9]


@dataclass(frozen=True)
class StreamFigures:
    """What a run's cell reads of its streams (Streams): how many were answered in full and their
    events, and the p99s of the time to the first event, of the gaps between events and of the
    other answers' response time (a mix's ordinary requests beside its streams). Milliseconds."""

    count: int
    events: int
    first_event_p99_ms: float | None
    event_gap_p99_ms: float | None
    others_p99_ms: float | None  # None: every answer was a stream

    @classmethod
    def of(cls, s: Streams) -> "StreamFigures":
        def p99(h: Histogram) -> float | None:
            return h.p("99") / 1000 if h.count and h.p("99") is not None else None

        return cls(s.count, s.events, p99(s.first_event), p99(s.event_gap), p99(s.others_response_time))


@dataclass(frozen=True)
class LoadFigures:
    """What a run's cell reads of its load result (results/aggregate.py), small enough to read for
    10,000 runs at once: the store keeps it beside the load result, which is then decoded only
    where something reads it (results/runs.py Run.load). Milliseconds."""

    completed: int
    errors: int
    response_ms: float | None  # the mean response time
    timing_ms: dict[str, float] | None  # mean Server-Timing per request, by metric; None: none sent
    workers: tuple[int, ...]  # the requests each server worker answered, most first
    connections: int | None = None  # connections opened in the measured phase (None: not counted, older stores)
    connection_spread: ConnectionSpread | None = None  # kept-alive connections side by side (None: not kept)
    streams: StreamFigures | None = None  # where any answer was a stream of server-sent events

    @classmethod
    def of(cls, r: LoadResult) -> "LoadFigures":
        """A load result's figures. A Server-Timing metric only some responses carry (a /mix that
        draws /db for some requests: their pool and db) counts as 0 in the others, so the parts
        of every request add up."""
        m = r.measured
        rt = m.response_time
        timing = None
        if m.server_timing:
            answered = max(h.count for h in m.server_timing.values())
            timing = {k: h.mean / 1000 * h.count / answered for k, h in m.server_timing.items()
                      if h.mean is not None and answered}
        return cls(m.completed, m.errors, rt.mean / 1000 if rt and rt.mean is not None else None, timing,
                   tuple(sorted(m.workers.values(), reverse=True)),
                   m.connect_time.count if m.connect_time is not None else None, r.connection_spread,
                   StreamFigures.of(m.streams) if m.streams is not None else None)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "LoadFigures":
        spread, streams = d.get("connection_spread"), d.get("streams")
        return cls(d["completed"], d["errors"], d["response_ms"], d["timing_ms"], tuple(d["workers"]), d.get("connections"),
                   ConnectionSpread(**spread) if spread else None, StreamFigures(**streams) if streams else None)


def to_dict(r: LoadResult) -> dict[str, Any]:
    """LoadResult -> plain JSON-able dict (the store keeps this; ``raw`` rides along)."""
    from dataclasses import asdict

    return asdict(r)


def summary(d: dict[str, Any]) -> dict[str, Any]:
    """A stored load document (:func:`to_dict`) as the analysis reads it: the same document without
    what only a run's detail and the histogram exports read, the tool's own document (``raw``), the
    warm-up phase and each interval's encoded histogram. A third of the whole, or less (the store
    keeps both: results/store.py)."""
    return {**d, "raw": None, "warmup": None,
            "series": [{**p, "hdr": None} if p.get("hdr") else p for p in d.get("series") or []]}


@dataclass(frozen=True)
class ConnectionSpread:
    """Kept-alive connections side by side (arena-load's per_connection): the worst tenth by their
    own p99 against the rest and against the fastest quarter. A server that serves some connections
    before others (Puma 5's keep-alive order) shows it here and not in the run's percentiles; where
    it starves more than half of them, the rest's median is itself a starved one, and only the
    fastest quarter still shows the connections it serves first."""

    connections: int  # with at least one measured request
    worst_p99_us: float  # the median of the worst tenth's own p99s (at least one connection)
    rest_p99_us: float  # the median of the others' p99s
    worst_requests: float  # requests per connection, the worst tenth's mean and the others' median
    rest_requests: float
    untracked: int = 0  # connections past the generator's cap
    fastest_p99_us: float | None = None  # the median of the fastest quarter's p99s (None: stored before it was kept)
    fastest_requests: float | None = None  # their median requests per connection

    @classmethod
    def of(cls, per_connection: dict[str, Any] | None) -> "ConnectionSpread | None":
        """From arena-load's ``per_connection`` (None: none, or fewer than 2 connections to set apart)."""
        if not per_connection or len(per_connection.get("p99_us") or ()) < 2:
            return None
        rows = sorted(zip(per_connection["p99_us"], per_connection["requests"]))
        k = max(1, len(rows) // 10)
        worst, rest, fastest = rows[-k:], rows[:-k], rows[:max(1, len(rows) // 4)]
        return cls(len(rows), median([p for p, _ in worst]), median([p for p, _ in rest]),
                   sum(n for _, n in worst) / k, median([n for _, n in rest]), per_connection.get("untracked", 0),
                   median([p for p, _ in fastest]), median([n for _, n in fastest]))


def from_dict(d: dict[str, Any]) -> LoadResult:
    """The inverse of :func:`to_dict`."""

    def hist(h):
        return None if h is None else Histogram(**h)

    def phase(p):
        if p is None:
            return None
        p = dict(p)
        for k in ("response_time", "service_time", "connect_time", "send_lag"):
            p[k] = hist(p[k])
        p["server_timing"] = {k: hist(v) for k, v in p["server_timing"].items()}
        p["streams"] = Streams.of(p.get("streams"), hist)
        for k in ("status", "workers"):
            p[k] = {int(code): n for code, n in p[k].items()}
        return Phase(**p)

    d = dict(d)
    d["measured"], d["warmup"] = phase(d["measured"]), phase(d["warmup"])
    d["series"] = [SeriesPoint.of(s) for s in d["series"]]
    d["schedule_lag"] = hist(d["schedule_lag"])
    if d.get("connection_spread") is not None:
        d["connection_spread"] = ConnectionSpread(**d["connection_spread"])
    return LoadResult(**d)
