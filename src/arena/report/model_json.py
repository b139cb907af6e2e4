"""The model's answers as JSON: ``arena predict --json`` (schemas/predict.schema.json), ``arena
recommend --json`` (schemas/recommend.schema.json) and ``arena simulate --json``
(schemas/simulate.schema.json). Formats only."""

from __future__ import annotations

from typing import Any

from arena.report.answer_view import answer_json, figure_json


def predict_json(got) -> dict[str, Any]:
    """An app/predict.py Predictions as JSON."""
    cal, config = got.calibration, got.config
    rows = []
    for row in got.rows:
        pr, sim = row.prediction, row.simulated
        tp, p99 = row.throughput_range, row.p99_range_ms
        rows.append({
            "model": row.load.model, "level": row.load.level, "throughput": pr.throughput,
            "throughput_low": tp[0] if tp else None, "throughput_high": tp[1] if tp else None,
            "mean_ms": pr.mean_ms, "p50_ms": pr.p50_ms, "p99_ms": pr.p99_ms,
            "p99_low_ms": p99[0] if p99 else None, "p99_high_ms": p99[1] if p99 else None,
            "cpu_utilization": pr.cpu_utilization, "binds": pr.binding, "overloaded": pr.overloaded,
            "measured_throughput": row.measured, "measured_p99_ms": row.measured_p99_ms,
            "explained": [{"key": f.key, "name": f.name, "effect_p99_ms": f.effect_p99_ms,
                           "measured_p99_without_ms": f.without(row.measured_p99_ms)} for f in row.explained],
            "simulated": None if sim is None else {"throughput": sim.prediction.throughput,
                                                   "p50_ms": sim.prediction.p50_ms, "p99_ms": sim.prediction.p99_ms,
                                                   "p99_low_ms": sim.p99_lo_ms, "p99_high_ms": sim.p99_hi_ms,
                                                   "throttled_ms_per_s": sim.throttled_ms_per_s}})
    return {"schema": "arena/predict/1", "server": cal.server, "workload": cal.workload, "calibrated": got.calibrated,
            "calibration": {"cores": cal.cores, "quota": cal.quota, **{k: None if f is None else figure_json(f) for k, f in (
                ("cpu_ms", cal.cpu_ms), ("io_ms", cal.io_ms), ("outside_ms", cal.outside_ms), ("db_ms", cal.db_ms))},
                            "service_fits": [f.json() for f in cal.service_fits]},
            "configuration": {"processes": config.processes, "threads": config.threads, "pool": config.pool,
                              "cores": config.cores, "routing": config.routing},
            "rows": rows, "extrapolated": list(got.extrapolated)}


def recommend_json(recs, cells) -> dict[str, Any]:
    """app/predict.py Recommendations (one per workload) as JSON: the measured answer at the load first,
    then the model's candidates per server."""
    def candidate(c) -> dict[str, Any]:
        return {"configuration": c.name, "processes": c.processes, "threads": c.threads, "pool": c.pool,
                "throughput": c.predicted.throughput, "p50_ms": c.predicted.p50_ms, "p99_ms": c.predicted.p99_ms,
                "memory_mib": c.memory_mib, "binds": c.predicted.binding, "fits": c.fits,
                "why_not": c.why_not or None}

    out = []
    for rec in recs:
        here = [c for c in cells if c.model == rec.load.model and c.level == rec.load.level]
        best = rec.best
        out.append({"workload": rec.workload, "measured": answer_json(rec.measured, here),
                    "per_server": [{"server": s.server, "cores": s.cores, "candidates": [candidate(c) for c in s.shown]}
                                   for s in rec.per_server],
                    "best_predicted": candidate(best) if best else None})
    load = recs[0].load
    g = recs[0].goal
    return {"schema": "arena/recommend/1", "load": {"model": load.model, "level": load.level},
            "goal": {"p99_max_ms": g.p99_ms, "memory_max_mib": g.memory_mib, "error_max_pct": g.error_pct},
            "recommendations": out}


def _mean(m) -> dict[str, float]:
    """A simulated figure (sim.Mean, seconds) in ms: the mean over replications and its 95% interval."""
    return {"mean_ms": m.mean * 1e3, "low_ms": m.lo * 1e3, "high_ms": m.hi * 1e3}


def summary_json(s) -> dict[str, Any]:
    """A simulation's summary (sim.Summary) as JSON."""
    return {"throughput": {"mean": s.throughput.mean, "low": s.throughput.lo, "high": s.throughput.hi},
            "queue_mean": _mean(s.wait_mean), "queue_p99": _mean(s.wait["p99"]),
            "response": {q: _mean(s.response[q]) for q in ("p50", "p90", "p99", "p99.9")}}


def simulate_json(kind: str, requests: int, replications: int, summaries: dict[str, Any], matched=None) -> dict[str, Any]:
    """``arena simulate --json`` (schemas/simulate.schema.json): one server's summary (key "server")
    or each balancer policy's, and where asked how many instances each policy needs."""
    return {"schema": "arena/simulate/1", "kind": kind, "requests_per_replication": requests,
            "replications": replications, "summaries": {k: summary_json(v) for k, v in summaries.items()},
            "matched": None if matched is None else {
                "policy": matched.policy, "instances": matched.instances, "reached_ms": matched.reached_s * 1e3,
                "within_ms": matched.within_s * 1e3, "needs": matched.needs}}
