"""Comparison tables of stored runs: per configuration and load level, the median and 95% CI of
throughput and p99 across repetitions (valid runs only), with memory and validity. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from arena import stats
from arena.store import StoredRun


@dataclass
class Row:
    label: str
    level: str
    runs: int
    valid: int
    throughput: float | None
    throughput_ci: tuple[float, float] | None
    p99_us: float | None
    p99_ci: tuple[float, float] | None
    p50_us: float | None
    pss_bytes: float | None
    problems: list[str]


def level_key(run: StoredRun) -> str:
    level = f"c={int(run.level)}" if run.model == "closed" else f"r={run.level:g}"
    return level if run.workload == "default" else f"{run.workload} {level}"


def comparison(runs: list[StoredRun]) -> list[Row]:
    """One row per (configuration, level), in the order configurations first appear, levels ascending."""
    groups: dict[tuple[str, str], list[StoredRun]] = {}
    for r in sorted(runs, key=lambda r: (r.level,)):
        groups.setdefault((r.label, level_key(r)), []).append(r)
    order = list(dict.fromkeys(r.label for r in runs))
    rows = []
    for (label, level), rs in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]), kv[1][0].level)):
        ok = [r for r in rs if r.valid]
        tp = [r.throughput for r in ok]
        p99 = [r.p99_us for r in ok if r.p99_us is not None]
        problems = sorted({f for r in rs if not r.valid for f in r.json("flags")})
        rows.append(Row(label, level, len(rs), len(ok), stats.median(tp) if tp else None, stats.ci95(tp),
                        stats.median(p99) if p99 else None, stats.ci95(p99),
                        stats.median([r.p50_us for r in ok]) if ok else None,
                        stats.median([r.pss_bytes for r in ok if r.pss_bytes]) if ok else None, problems))
    return rows
