"""An ab/wrk-style text summary of one LoadResult. Pure: a result in, lines out."""

from __future__ import annotations

from arena.results.load_result import ERROR_CLASSES, OCCASIONAL_ERROR_CLASSES, Histogram, LoadResult
from arena.clients import Clients

PERCENTILES = ("50", "75", "90", "99", "99.9", "99.99", "100")


def ms(us: float | None) -> str:
    if us is None:
        return "-"
    return f"{us / 1000:.2f}ms" if us < 10_000_000 else f"{us / 1e6:.2f}s"


def size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.2f}{unit}"
        n /= 1024
    return ""


def _percentile_line(label: str, h: Histogram | None) -> str:
    if h is None or h.count == 0:
        return f"  {label:16} -"
    cells = "  ".join(f"{'max' if q == '100' else q + '%'} {ms(h.p(q))}" for q in PERCENTILES)
    return f"  {label:16} {cells}"


def load_summary(r: LoadResult) -> str:
    m = r.measured
    s = r.settings
    model = (f"open model, {r.rate:g} req/s {s.arrival} arrivals, up to {r.connections} connections"
             if r.model == "open" else f"closed model, {r.connections} connections")
    keep = Clients(s.keep_alive, s.link_delay_s, s.upload_bps, s.download_bps).text
    lines = [f"{r.tool} {r.tool_version or ''}: {m.duration_s:.2f}s @ {r.url} ({model}, {keep})"
             + ("  [INTERRUPTED: partial result]" if r.interrupted else "")]
    occurred = tuple(k for k in OCCASIONAL_ERROR_CLASSES if m.error_counts.get(k))
    known = set(ERROR_CLASSES + OCCASIONAL_ERROR_CLASSES)
    classes = ERROR_CLASSES + occurred if set(m.error_counts) <= known else tuple(m.error_counts)  # a tool's own
    errors = ", ".join(f"{k.replace('_', ' ')} {m.error_counts.get(k, 0)}" for k in classes)
    lines.append(f"Requests:     {m.completed} completed, {m.errors} errors ({errors})")
    for miss in (r.raw or {}).get("captures_missed", []):  # arena-load's, with a mix of sessions
        lines.append(f"              session '{miss['session']}': capture '{miss['capture']}' not found in "
                     f"{miss['answers']} answers (each an error, its session ended)")
    if m.unsent is not None:
        lines.append(f"              {m.issued} issued, {m.sent} sent, {m.unsent} never sent, {m.in_flight} unanswered at the end")
    offered = f" (offered {m.offered_rps:.1f})" if m.offered_rps is not None else ""
    lines.append(f"Throughput:   {m.achieved_rps:.1f} req/s{offered}")
    lines.append(f"Transfer:     {size(m.bytes_received)} received, {size(m.bytes_sent)} sent")
    if (c := r.connection_spread) is not None:
        line = (f"Connections:  {c.connections} kept alive; by their own p99, the worst tenth {c.worst_p99_us / 1000:.1f} ms "
                f"({c.worst_requests:.0f} requests each), the others {c.rest_p99_us / 1000:.1f} ms ({c.rest_requests:.0f})")
        if c.fastest_p99_us is not None:
            line += f", the fastest quarter {c.fastest_p99_us / 1000:.1f} ms ({c.fastest_requests:.0f})"
        if c.untracked:
            line += f"; {c.untracked} more not tracked"
        lines.append(line)
    lines.append("Status:       " + (", ".join(f"{k}: {v}" for k, v in sorted(m.status.items())) or "none"))
    latency = "from the intended send time" if r.model == "open" else "at concurrency " + str(r.connections)
    if m.unsent:  # what the percentiles cover: the requests that were sent and answered, not those never sent
        latency += f"; of the {m.completed + m.errors} answered, not the {m.unsent} never sent"
    lines.append(f"Latency ({latency}):")
    lines.append(_percentile_line("response time", m.response_time))
    lines.append(_percentile_line("service time", m.service_time))
    if m.connect_time and m.connect_time.count:
        lines.append(_percentile_line("connect", m.connect_time))
    if (st := m.streams) is not None:
        lines.append(f"Streams:      {st.count} answered in full, {st.events} events (first byte, first and last "
                     "event from the intended send; the gaps between events as they arrived):")
        lines += [_percentile_line(label, h) for label, h in (("first byte", st.first_byte), ("first event", st.first_event),
                                                               ("event gap", st.event_gap), ("last event", st.last_event))]
    if m.server_timing:
        parts = ", ".join(f"{k} {ms(h.p('50'))}" for k, h in m.server_timing.items())
        lines.append(f"Server-Timing p50: {parts}")
    if m.workers:
        total = sum(m.workers.values())
        lines.append("Workers:      " + ", ".join(f"pid {pid}: {n} ({100 * n / total:.1f}%)"
                                                  for pid, n in sorted(m.workers.items())))
    if r.generator_cpu_s is not None:
        verdict = ("SATURATED: " + "; ".join(r.saturation_reasons)) if r.saturated else "not saturated"
        per = f"{r.cpu_per_request_us:.1f}us/request, " if r.cpu_per_request_us else ""
        lines.append(f"Generator:    CPU {r.generator_cpu_s:.2f}s ({per}{100 * (r.generator_utilization or 0):.0f}% busy), {verdict}")
    if r.hosts:
        lines.append(f"Load hosts:   {len(r.hosts)}, merged exactly (their histograms added)")
        for h in r.hosts:
            late = f"{h['late_ms']:+.1f} ms" if h.get("late_ms") is not None else "?"
            lines.append(f"  {h['name']} ({h['ip']}): {h['completed']} completed, {h['achieved_rps']:.1f} req/s, "
                         f"p99 {ms(h['p99_us'])}; start {late}, clock offset {h['offset_ms']:+.1f} ms, "
                         f"round trip {h['rtt_ms']:.2f} ms" + (f"; {h['problem']}" if h.get("problem") else ""))
    return "\n".join(lines)
