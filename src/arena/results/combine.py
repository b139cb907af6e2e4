"""One load result from several load hosts' results of the same run (``arena load --cluster``).

Exact where the figures allow it: counts, bytes, statuses and errors are summed; histograms are
merged bucket by bucket (HdrHistogram's add: the merged histogram *is* the histogram of every host's
samples, so its percentiles are those of all requests, never an average of percentiles). The
per-second series sums each second's counts and merges each second's histograms the same way (where
a host's series lacks them, its percentiles are left out: None). The generator's figures
take the worst host (utilisation, pause) or the sum (CPU); a host's saturation reasons are named by
host. Each host's own figures are kept in ``hosts``.
"""

from __future__ import annotations

from typing import Any, Sequence

from arena.results.load_result import Histogram, LoadResult, Phase, SeriesPoint


def histograms(hs: Sequence[Histogram | None]) -> Histogram | None:
    """The exact merge of histograms (None where none is given)."""
    present = [h for h in hs if h is not None]
    if not present:
        return None
    missing = [h for h in present if h.count and not h.hdr]
    if missing:
        raise ValueError("a histogram without its HdrHistogram encoding cannot be merged exactly")
    merged = None
    for h in present:
        if h.hdr:
            full = h.decode()
            if merged is None:
                merged = full
            else:
                merged.add(full)
    return Histogram.of_hdr(merged) if merged is not None else Histogram(0, None, None, None, None, {}, None)


def _sum(values: Sequence[int | float | None]) -> Any:
    """The sum, or None where any host lacks the figure."""
    return None if any(v is None for v in values) else sum(values)


def _counts(ds: Sequence[dict]) -> dict:
    out: dict = {}
    for d in ds:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def phases(ps: Sequence[Phase]) -> Phase:
    names = sorted({n for p in ps for n in p.server_timing})
    return Phase(
        duration_s=max(p.duration_s for p in ps), issued=_sum([p.issued for p in ps]), sent=_sum([p.sent for p in ps]),
        completed=sum(p.completed for p in ps), errors=sum(p.errors for p in ps), unsent=_sum([p.unsent for p in ps]),
        in_flight=_sum([p.in_flight for p in ps]), offered_rps=_sum([p.offered_rps for p in ps]),
        achieved_rps=sum(p.achieved_rps for p in ps), status=_counts([p.status for p in ps]),
        error_counts=_counts([p.error_counts for p in ps]), workers=_counts([p.workers for p in ps]),
        bytes_sent=_sum([p.bytes_sent for p in ps]), bytes_received=_sum([p.bytes_received for p in ps]),
        response_time=histograms([p.response_time for p in ps]), service_time=histograms([p.service_time for p in ps]),
        connect_time=histograms([p.connect_time for p in ps]), send_lag=histograms([p.send_lag for p in ps]),
        server_timing={n: histograms([p.server_timing.get(n) for p in ps]) for n in names},
        server_timing_dropped=sum(p.server_timing_dropped for p in ps))


def series(all_series: Sequence[Sequence[SeriesPoint]]) -> list[SeriesPoint]:
    """Each interval's counts summed and histograms merged over the hosts (their intervals start
    together: a common start)."""
    by: dict[float, list[SeriesPoint]] = {}
    for points in all_series:
        for p in points:
            by.setdefault(round(p.t, 6), []).append(p)
    out = []
    for t, ps in sorted(by.items()):
        h = histograms([p.histogram() for p in ps]) if all(p.hdr for p in ps) else None
        out.append(SeriesPoint(
            t, _sum([p.sent for p in ps]), sum(p.completed for p in ps), sum(p.errors for p in ps),
            h.p("50") if h else None, h.p("90") if h else None, h.p("99") if h else None,
            h.max if h else max((p.max_us for p in ps if p.max_us is not None), default=None), h.hdr if h else None,
            _counts([p.workers or {} for p in ps]) or None))
    return out


def combine(results: Sequence[LoadResult], hosts: Sequence[dict[str, Any]]) -> LoadResult:
    """One result of the hosts' ``results`` (in the order of ``hosts``, each a dict with its ``name``)."""
    if not results or len(results) != len(hosts):
        raise ValueError("one result per load host is needed")
    names = [h["name"] for h in hosts]
    first = results[0]
    cpu = [r.generator_cpu_s for r in results]
    completed = sum(r.measured.completed for r in results)
    per_request = [(r.cpu_per_request_us, r.measured.completed) for r in results]
    config = dict(first.config, rate=_sum([r.rate for r in results]), connections=_sum([r.connections for r in results]),
                  hosts=len(results))
    return LoadResult(
        tool=first.tool, tool_version=first.tool_version, model=first.model, url=first.url,
        connections=config["connections"], rate=config["rate"], interrupted=any(r.interrupted for r in results),
        measured=phases([r.measured for r in results]),
        warmup=phases([r.warmup for r in results]) if all(r.warmup for r in results) else None,
        series=series([r.series for r in results]), generator_cpu_s=_sum(cpu),
        generator_utilization=max((r.generator_utilization for r in results if r.generator_utilization is not None),
                                  default=None),
        cpu_per_request_us=(sum(c * n for c, n in per_request) / completed
                            if completed and all(c is not None for c, _ in per_request) else None),
        schedule_lag=histograms([r.schedule_lag for r in results]),
        saturated=None if all(r.saturated is None for r in results) else any(bool(r.saturated) for r in results),
        saturation_reasons=[f"host {n}: {why}" for n, r in zip(names, results) for why in r.saturation_reasons],
        config=config, raw={"hosts": [dict(h, result=r.raw) for h, r in zip(hosts, results)]},
        open_failure="; ".join(f"host {n}: {r.open_failure}" for n, r in zip(names, results) if r.open_failure) or None,
        generator_paused_ms=max((r.generator_paused_ms for r in results if r.generator_paused_ms is not None),
                                default=None),
        generator_pause_limit_ms=min((r.generator_pause_limit_ms for r in results
                                      if r.generator_pause_limit_ms is not None), default=None),
        hosts=[dict(h) for h in hosts])
