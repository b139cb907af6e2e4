"""``arena tune``'s answer as text: what calibration learned, the choice with its evidence, how sure
it is and what more time would buy; the same evidence heads the config files it writes."""

from __future__ import annotations

import platform
import time

from arena.report.answer_view import capacity_json, figure_json, goal_json, interval_text


def calibration_lines(tuned) -> list[str]:
    """Per server: CPU and I/O per request, the GIL/GVL wait's share, memory per process and thread."""
    out = []
    for server, c in tuned.calibrations.items():
        parts = [f"CPU {c.cpu_ms.median:.2f} ms/request ({interval_text(c.cpu_ms)})",
                 f"I/O {c.io_ms.median:.2f} ms"]
        if c.gil_wait_ms is not None and c.gil_wait_ms.median is not None:
            total = c.cpu_ms.median + c.io_ms.median + c.gil_wait_ms.median
            share = 100 * c.gil_wait_ms.median / total if total else 0.0
            parts.append(f"GIL/GVL wait {c.gil_wait_ms.median:.2f} ms ({share:.0f}% at one client)")
        if c.memory_per_process_mib is not None:
            parts.append(f"memory {c.memory_base_mib or 0:.0f} MiB + {c.memory_per_process_mib:.1f} MiB/process"
                         + (f" + {max(0.0, c.memory_per_thread_mib):.2f} MiB/thread" if c.memory_per_thread_mib is not None
                            else ""))
        out.append(f"  {server}: " + ", ".join(parts))
    for server, why in tuned.left_out.items():
        out.append(f"  {server}: left out: {why}")
    return out


def capacity_text(cap) -> str:
    """"180 req/s (interval 180 .. 189: the highest rate within the goal, confirmed over 3 runs; the
    lowest rate beyond it)"; "at least 180 req/s (...)" where no rate tried failed; where none passed,
    what was tried ("none within the goal at the 1 rate tried: 1200 req/s, 1 run"): not a claim that
    no rate would pass, which one rate tried cannot make."""
    if cap is None:
        return "not searched"
    if cap.lo is None:
        if not cap.probes:
            return "not found: no rate was tried"
        tried = sorted(cap.probes)
        rates = ", ".join(f"{r:g} req/s ({n} run{'s' * (n != 1)})" for r, _, n in tried[:4])
        return (f"none within the goal at the {len(tried)} rate{'s' * (len(tried) != 1)} tried: {rates}"
                + (", ..." if len(tried) > 4 else ""))
    if cap.hi is None:
        return f"at least {cap.lo:g} req/s (no rate tried failed)"
    sure = f"confirmed over {cap.runs_at_lo} runs" if cap.confirmed else f"{cap.runs_at_lo} run(s), not confirmed"
    return (f"{cap.lo:g} req/s (interval {cap.lo:g} .. {cap.hi:g}: the highest rate within the goal, {sure}; "
            f"the lowest rate beyond it)")


def capacity_lines(found) -> list[str]:
    """Each configuration's capacity (Analysis.capacities), one line each."""
    many = len({w for _, w, _ in found}) > 1
    return [f"capacity of {label}" + (f" ({workload})" if many else "") + f": {capacity_text(cap)}"
            for label, workload, cap in found]


def answer_lines(tuned) -> list[str]:
    t, ch, names = tuned.tuning, tuned.chosen, tuned.names
    goal = tuned.request.goal
    out = []
    if ch is None:
        if t.none_meets and t.best_p99_at is not None:
            key, level = t.best_p99_at
            out.append(f"nothing kept within the goal ({goal}); the best p99 reached: {t.best_p99_ms:.1f} ms, by "
                       f"{names[key]} at {level.label}")
        elif t.none_meets:
            out.append(f"nothing kept within the goal ({goal}); not one run was valid")
        else:
            out.append(f"no configuration was chosen ({t.stopped})")
        return out
    where = "" if ch.level is None else f" at {ch.level.label}"
    if t.load is None:
        out.append(f"chosen: {ch.name}: capacity {capacity_text(t.capacities.get(ch.key))}")
    else:
        out.append(f"chosen: {ch.name}: {ch.throughput or 0:.1f} req/s{where}")
    p99 = ch.p99_ms
    out.append(f"  p99{where}: " + ("-" if p99.median is None else f"{p99.median:.1f} ms ({interval_text(p99)})")
               + (f"; memory {ch.memory_mib:.0f} MiB PSS" if ch.memory_mib else "") + f"; goal: {goal}")
    if t.tied:
        out.append("  not shown to be worse: " + "; ".join(
            f"{names[k]} (capacity {capacity_text(t.capacities[k])})" if k in t.capacities else names[k] for k in t.tied))
    elif len(t.raced) == 1:
        out.append("  no other contender was measured (the budget had room for one capacity search)")
    else:
        out.append(f"  the {len(t.raced) - 1} other contender(s) raced were shown worse or out of the goal")
    top = {ch.name, *(names[k] for k in t.tied)}
    out += [f"  why {'the chosen' if f.label == ch.name else 'one not shown worse'} is slow: {f.line}"
            for f in tuned.why.found if f.label in top]
    return out


def sureness_lines(tuned) -> list[str]:
    t = tuned.tuning
    out = [f"stopped: {t.stopped}; {t.runs} run(s) in the search, {tuned.calibration_runs} to calibrate, "
           f"{tuned.elapsed_s:.0f} s"]
    if t.more:
        out.append("more time would buy:")
        out += [f"  {m}" for m in t.more]
    return out


def evidence(tuned, version: str) -> list[str]:
    """The header of the config files written: the choice and the figures it rests on."""
    req = tuned.request
    lines = [f"Written by arena tune {version} on {time.strftime('%Y-%m-%d')}, {platform.node()} "
             f"({platform.machine()}), server CPUs {','.join(map(str, req.server_cpus))}"
             + (f" under {req.limits.text}" if req.limits.any else ""),
             f"goal: {req.goal}"]
    lines += answer_lines(tuned)
    lines.append(f"measured runs: experiment {tuned.experiment} in {tuned.store} "
                 f"(arena show {tuned.experiment} --store {tuned.store})")
    return [line.strip() for line in lines]


def tune_json(tuned) -> dict:
    """``arena tune --json`` (schemas/tune.schema.json): the choice with its figures (null where none
    was chosen), those not shown worse, what calibration learned per server, how the search ended."""
    t, ch, names, req = tuned.tuning, tuned.chosen, tuned.names, tuned.request

    def capacity(key):
        cap = t.capacities.get(key)
        return None if cap is None else capacity_json(cap)

    def maybe(f):
        return None if f is None else figure_json(f)

    chosen = None if ch is None else {
        "configuration": ch.name, "server": ch.server, "processes": ch.processes, "threads": ch.threads,
        "level": None if ch.level is None else ch.level.label, "throughput": ch.throughput,
        "p99_ms": figure_json(ch.p99_ms), "memory_mib": ch.memory_mib, "capacity": capacity(ch.key)}
    return {
        "schema": "arena/tune/1", "experiment": tuned.experiment, "store": tuned.store,
        "goal": goal_json(req.goal),
        "server_cpus": list(req.server_cpus), "load": None if req.load is None else req.load.label,
        "chosen": chosen,
        "tied": [{"configuration": names[k], "capacity": capacity(k)} for k in t.tied],
        "calibration": {server: {"cpu_ms": figure_json(c.cpu_ms), "io_ms": figure_json(c.io_ms),
                                 "gil_wait_ms": maybe(c.gil_wait_ms), "memory_base_mib": c.memory_base_mib,
                                 "memory_per_process_mib": c.memory_per_process_mib,
                                 "memory_per_thread_mib": c.memory_per_thread_mib}
                        for server, c in tuned.calibrations.items()},
        "left_out": dict(tuned.left_out),
        "stopped": t.stopped, "runs": t.runs, "calibration_runs": tuned.calibration_runs,
        "elapsed_s": tuned.elapsed_s, "more": list(t.more), "why": tuned.why.json(),
    }
