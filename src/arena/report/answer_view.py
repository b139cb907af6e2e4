"""An answer (results/answer.py) as sentences and as JSON: what ``arena show`` prints, what the
report opens with, and ``arena show --json`` (schemas/answer.schema.json). Formats only."""

from __future__ import annotations

from typing import Any, Sequence

from arena import stats
from arena.results.aggregate import FIGURES, MiB, Cell, Figure
from arena.results.answer import Answer, Goal, Pick, Versus
from arena.results.thresholds import Outcome
from arena.results.streams import Held
from arena.results.runs import SHARED
from arena.results.why.finding import Why

METHOD = (f"comparisons are ratios of geometric means with a 95% interval ({stats.Ratio.METHOD}); a difference "
          "is declared only where the interval excludes 1 and the ratio is beyond {threshold:g}%")


def interval_text(figure, k: float = 1.0) -> str:
    """An interval of a median as text: "a .. b", "range a .. b" when it is the repetitions' range,
    "one run: none" for a median of one valid run (it looks like the rest otherwise), "-" without a
    figure. Positive quantities are shown truncated at 0."""
    iv = figure.interval
    if iv is None:
        return "one run: none" if figure.n == 1 else "-"
    text = f"{max(0.0, iv.lo) / k:.4g} .. {iv.hi / k:.4g}"
    return f"range {text}" if iv.is_range else text


def figure_text(f: Figure, unit: str = "") -> str:
    """A median with its interval: "196.8 req/s (range 195.1 .. 198)", "(95% CI 195.9 .. 197.2)"."""
    if f.median is None:
        return "-"
    ci = "95% CI " if f.interval is not None and not f.interval.is_range else ""
    return f"{f.median:.1f}{unit} ({ci}{interval_text(f)})"


def cell_text(c: Cell) -> str:
    p99 = c.p99_us.scaled(1000)
    return (f"{c.label} at {c.level_label}: {figure_text(c.throughput, ' req/s')}, p99 "
            f"{'-' if p99.median is None else f'{p99.median:.1f} ms'}")


def meets_text(p: Pick) -> str:
    return f" (meets {' and '.join(p.check.median_only)} at the median only)" if p.check.median_only else ""


def comparison_text(v: Versus) -> str:
    """ "puma 2x5 at 16 clients: throughput 0.99x [0.95, 1.03], undecided (...); p99 ..." """
    return f"{v.cell.label} at {v.cell.level_label}: {verdict_text(v)}"


def verdict_text(v: Versus) -> str:
    """ "throughput 0.99x [0.95, 1.03], undecided (about 3 more runs each would likely decide); p99 ..." """
    c = v.throughput
    if c is None:
        return "no throughput to compare"
    text = f"throughput {c.ratio}, {c.verdict}"
    if c.verdict == stats.UNDECIDED:
        text += (f" ({c.why})" if c.ratio.lo is None else
                 f" (about {c.more} more run{'s' * (c.more != 1)} each would likely decide)" if c.more else
                 " (many more runs would be needed)")
    if v.p99 is not None:
        text += f"; p99 {v.p99.ratio}, {v.p99.verdict}"
    return text


def answer_lines(a: Answer, many: bool) -> list[str]:
    """The answer in plain sentences, as ``arena show`` prints it: the headline, the group tied with
    the best, what binds it, each server's best, then the notes."""
    return [headline(a, many), *tied_lines(a), *server_lines(a), *notes(a)]


def headline(a: Answer, many: bool) -> str:
    """The answer in one sentence."""
    head = f"Workload {a.workload}: " if many else ""
    if a.best is None:
        return f"{head}no configuration keeps within the goal ({a.goal})."
    what = "best within the goal" if a.goal.latency else "most throughput at any latency (no p99 target)"
    return f"{head}{what}: {cell_text(a.best.cell)}{meets_text(a.best)}."


def tied_lines(a: Answer) -> list[str]:
    if a.best is None:
        return []
    lines = []
    if a.tied:
        lines.append("Tied for best (not shown to be worse): " + listed([comparison_text(v) for v in a.tied]) + ".")
    if a.undecided:
        lines.append("Undecided, not tied (too few valid runs to compare with the best): "
                     + listed([comparison_text(v) for v in a.undecided]) + ".")
    if not lines and a.beaten:
        lines.append("Every other configuration is worse, beyond the threshold.")
    return lines


LISTED = 10  # a sentence names at most this many configurations; the table and show --json hold every one


def listed(items: list[str]) -> str:
    """The items joined into a sentence's list, the first LISTED of them and then how many more: a grid
    of 500 configurations would otherwise make one paragraph of 250 of them."""
    more = len(items) - LISTED
    if more <= 1:
        return "; ".join(items)
    return "; ".join(items[:LISTED]) + f"; and {more} more (each in the table, and in show --json)"


def server_lines(a: Answer) -> list[str]:
    if len(a.per_server) < 2:
        return []
    return [f"best of {p.cell.server}: {cell_text(p.cell)}{meets_text(p)}; binds: {p.binds}" for p in a.per_server]


def notes(a: Answer) -> list[str]:
    """What binds the best, the trade-off without a latency target, A/A pairs, the goal and the
    method, and what was left out (each reason once, with its count)."""
    lines = [f"What binds {a.best.cell.label}: {a.best.binds}."] if a.best else []
    if not a.goal.latency and a.pareto:
        lines.append("No latency target given ([goal] p99_max, or --p99-max): the trade-off of throughput, p99 and "
                     "memory has these cells nothing beats on all three: "
                     + listed([_pareto_text(c) for c in a.pareto]) + ".")
    lines += [f"A/A {comparison_text(v)} against {v.base.label}" for v in a.twins]
    if a.best and any(r.shared for r in a.best.cell.runs):
        lines.append(f"The server and the load generator shared CPUs ([layout] share): {SHARED}.")
    lo, hi = a.repetitions
    lines.append(f"Goal: {a.goal}. Medians of {lo}" + (f" to {hi}" if hi != lo else "") +
                 " valid repetitions; intervals beside medians are 95% intervals of the median (order statistics) "
                 "with 6+ repetitions, else the range of the repetitions; "
                 + METHOD.format(threshold=100 * a.goal.threshold) + ".")
    if a.left_out:
        lines.append("Left out (invalid runs): " + ", ".join(f"{n} for {k}" for k, n in sorted(a.left_out.items())) + ".")
    if a.failed:
        lines += [f"Left out (not run): {n} run{'s' * (n > 1)}, {why}" for why, n in sorted(a.failed.items())]
    if not a.left_out and not a.failed:
        lines.append("No run was left out: every run was valid.")
    if a.excluded:
        lines.append("Configurations with no level within the goal: "
                     + ", ".join(f"{n} ({k})" for k, n in sorted(a.excluded.items())) + ".")
    return lines


ANSWER_HEAD = ("", "configuration", "level", "req/s", "p99 ms", "valid runs", "throughput vs the best", "verdict")


def answer_rows(a: Answer) -> list[list[str]]:
    """The answer's table: the best and the group tied with it, each with its ratio to the best and its
    interval, then each server's best not among them. A cell with fewer than two valid runs says so."""
    if a.best is None:
        return []

    def row(what: str, c: Cell, v: Versus | None) -> list[str]:
        p99 = c.p99_us.scaled(1000)
        ratio = "-" if v is None or v.throughput is None else str(v.throughput.ratio)
        verdict = "-" if v is None or v.throughput is None else v.throughput.verdict
        runs = f"{c.valid}" + (" (no interval)" if c.valid < 2 else "")
        return [what, c.label, c.level_label, figure_text(c.throughput), figure_text(p99), runs, ratio, verdict]

    rows = [row("best", a.best.cell, None)] + [row("tied", v.cell, v) for v in a.tied]
    rows += [row("undecided", v.cell, v) for v in a.undecided]
    shown = {a.best.cell.config} | {v.cell.config for v in a.tied + a.undecided}
    versus = {v.cell.config: v for v in a.beaten}
    rows += [row(f"best of {p.cell.server}", p.cell, versus.get(p.cell.config)) for p in a.per_server
             if p.cell.config not in shown]
    return rows


def _pareto_text(c: Cell) -> str:
    pss = c.pss_bytes.median
    return (f"{c.label} at {c.level_label} ({c.throughput.median:.1f} req/s, p99 {c.p99_us.median / 1000:.1f} ms"
            + (f", {pss / MiB:.0f} MiB" if pss else "") + ")")


# ---------------------------------------------------------------------- JSON (schemas/answer.schema.json)


def figure_json(f: Figure) -> dict[str, Any]:
    """A median and its interval as JSON (the schemas' figure)."""
    iv = f.interval
    return {"median": f.median, "n": f.n, "low": iv.lo if iv else None, "high": iv.hi if iv else None,
            "interval": None if iv is None else ("range" if iv.is_range else "95% order statistics")}


def cell_json(c: Cell, goal: Goal = Goal()) -> dict[str, Any]:
    """A cell's figures with their intervals, and whether it keeps within ``goal`` (Goal.check: the
    judgement the answer, the report, recommend and the capacity search make)."""
    check = goal.check(c)
    return {"configuration": c.label, "config": c.config, "server": c.server, "workload": c.workload,
            "processes": c.processes, "threads": c.threads, "model": c.model, "level": c.level,
            "valid": c.valid, "runs": c.total, "throughput": figure_json(c.throughput),
            "p50_ms": figure_json(c.p50_us.scaled(1000)), "p99_ms": figure_json(c.p99_us.scaled(1000)),
            "pss_mib": figure_json(c.pss_bytes.scaled(MiB)), "errors_pct": figure_json(c.error_pct), "flags": list(c.flags),
            "within_goal": check.within, "breaks": check.why_not}


def _comparison(v: Versus, figure: str, c: stats.Comparison) -> dict[str, Any]:
    return {"a": v.cell.label, "b": v.base.label, "a_level": v.cell.level, "b_level": v.base.level, "figure": figure,
            "ratio": c.ratio.value, "low": c.ratio.lo, "high": c.ratio.hi, "n": list(c.ratio.n),
            "verdict": c.verdict, "why": c.why, "more_runs": c.more}


def _pick(p: Pick) -> dict[str, Any]:
    return {"configuration": p.cell.label, "server": p.cell.server, "level": p.cell.level, "binds": p.binds,
            "meets_at_median_only": list(p.check.median_only)}


def goal_json(g: Goal) -> dict[str, Any]:
    """A goal as JSON (the schemas' goal): its limits (null: none) and the difference worth calling one."""
    return {"p99_max_ms": g.p99_ms, "memory_max_mib": g.memory_mib, "error_max_pct": g.error_pct,
            "threshold": g.threshold, "first_event_p99_max_ms": g.first_event_ms, "event_gap_p99_max_ms": g.event_gap_ms}


def capacity_json(c) -> dict[str, Any]:
    """A capacity search's result (model/search.Capacity) as JSON: the highest rate within the goal,
    the lowest beyond it, how sure, the p99 there and every rate tried."""
    return {"capacity_rps": c.lo, "beyond_rps": c.hi, "confirmed": c.confirmed, "runs": c.runs_at_lo,
            "p99_ms": None if c.p99_ms is None else figure_json(c.p99_ms),
            "rates": [{"rps": r, "within": ok, "runs": n} for r, ok, n in c.probes]}


def answer_json(a: Answer, cells: list[Cell]) -> dict[str, Any]:
    """One workload's answer as JSON: the goal, the best and the group tied with it, every comparison
    made, the Pareto front, each server's best, and every cell's figures with intervals."""
    g = a.goal
    return {
        "workload": a.workload,
        "goal": goal_json(g),
        "best": _pick(a.best) if a.best else None,
        "tied": [v.cell.label for v in a.tied],
        "undecided": [v.cell.label for v in a.undecided],
        "comparisons": [_comparison(v, figure, c) for v in a.comparisons
                        for figure, c in (("throughput", v.throughput), ("p99", v.p99)) if c is not None],
        "pareto": [{"configuration": c.label, "level": c.level} for c in a.pareto],
        "per_server": [_pick(p) for p in a.per_server],
        "left_out": a.left_out, "not_run": a.failed, "excluded": a.excluded,
        "repetitions": {"fewest": a.repetitions[0], "most": a.repetitions[1]},
        "cells": [cell_json(c, g) for c in cells if c.workload == a.workload],
        "method": METHOD.format(threshold=100 * g.threshold),
    }


def experiment_json(name: str, answers: list[Answer], cells: list[Cell], outcomes: Sequence[Outcome] = (),
                    capacities: Sequence = (), why: Why = Why(), streams: Sequence[Held] = ()) -> dict[str, Any]:
    """An experiment's answers as one JSON document (``arena show --json``), with its thresholds'
    outcomes on each cell, for a capacity search each configuration's capacity, the pathologies
    found (``why``) and, where it measured streams, the most each configuration held."""
    return {"schema": "arena/answer/1", "experiment": name, "why": why.json(),
            "answers": [answer_json(a, cells) for a in answers],
            "capacities": [{"configuration": label, "workload": workload, **capacity_json(c)}
                           for label, workload, c in capacities],
            "streams": [{"configuration": h.label, "workload": h.workload, "held": h.held, "tried": list(h.tried),
                         "beyond": h.why_not, "first_event_p99_ms": h.first_event_p99_ms,
                         "event_gap_p99_ms": h.event_gap_p99_ms, "others_p99_ms": h.others_p99_ms,
                         "pss_per_stream_mib": h.pss_per_stream_mib, "cpu_per_event_ms": h.cpu_per_event_ms}
                        for h in streams],
            "thresholds": [{"threshold": o.threshold.text, "configuration": o.cell.label, "workload": o.cell.workload,
                            "level": o.cell.level, "value": o.value, "passed": o.passed} for o in outcomes]}


def streams_lines(streams: Sequence[Held], goal: Goal) -> list[str]:
    """Each configuration's streams held within the goal, as ``arena show`` prints them."""
    if not streams:
        return []

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms"

    lines = [f"Streams held at once within the goal ({goal}; the goal's p99 on the other requests):"]
    for h in streams:
        tried = ", ".join(f"{t:g}" for t in h.tried)
        most = f"{h.held:g}" if h.held is not None else "none"
        most += f" (tried {tried}" + (f"; beyond: {h.why_not}" if h.why_not else "") + ")"
        figures = [f"first event p99 {ms(h.first_event_p99_ms)}", f"gap p99 {ms(h.event_gap_p99_ms)}"]
        figures += [f"other requests' p99 {ms(h.others_p99_ms)}"] if h.others_p99_ms is not None else []
        figures += [f"{h.pss_per_stream_mib * 1024:.0f} KiB a stream"] if h.pss_per_stream_mib is not None else []
        figures += [f"{h.cpu_per_event_ms:.2f} ms of CPU an event"] if h.cpu_per_event_ms is not None else []
        lines.append(f"  {h.label} [{h.workload}]: {most}; {', '.join(figures)}")
    return lines


def why_lines(why: Why, answer: Answer) -> list[str]:
    """The pathologies found in the answer's workload, each in one line ("Why" under the answer), those
    in its best or tied configurations first, saying so."""
    mine = [f for f in why.found if f.workload == answer.workload]
    if not mine:
        return []
    top = {(c.label, c.level_label) for c in ([answer.best.cell] if answer.best else []) + [v.cell for v in answer.tied]}
    mine.sort(key=lambda f: (f.label, f.level) not in top)
    return ["Why (known pathologies, with their evidence):"] + [
        f"  {'[best or tied for best] ' if (f.label, f.level) in top else ''}{f.line}" for f in mine]


def threshold_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """Each threshold: the cells it passed in, or where it failed with the cell's figure."""
    lines = []
    by: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by.setdefault(o.threshold.text, []).append(o)
    for text, mine in by.items():
        bad = [o for o in mine if o.passed is False]
        judged = [o for o in mine if o.passed is not None]
        if bad:
            unit = FIGURES[mine[0].threshold.figure][0]
            lines.append(f"threshold {text}: FAILED in {len(bad)} of {len(judged)} cells: " + "; ".join(
                f"{o.cell.label} at {o.cell.level_label} ({o.value:.4g} {unit})" for o in bad))
        else:
            lines.append(f"threshold {text}: passed in all {len(judged)} cells")
    return lines
