"""``arena run --until-decided``: after the planned repetitions, repeat only the cells whose
comparison with the best is undecided (results/answer.py), a round at a time, until every one is
decided, a cell reaches the most repetitions allowed, or the time budget would be overrun. Each
extra run is stored with why it was taken."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from arena import stats
from arena.app.analysis import analyse
from arena.app.storage import open_store, results
from arena.app.run import RunCounts, run_file
from arena.model.estimate import START_S
from arena.plan.experiment import Experiment
from arena.plan.parse import Overrides
from arena.results.answer import Versus
from arena.runner import Event, Seams, run_experiment

MAX_REPETITIONS = 10
BUDGET_S = 20 * 60.0


@dataclass(frozen=True)
class Round:
    """One round of runs beyond the plan: the cells repeated and why."""

    number: int
    wanted: dict[tuple, tuple[int, str]]  # a cell (RunSpec.cell) -> its next repetition and why


@dataclass(frozen=True)
class Decided:
    counts: RunCounts  # every run of the invocation, the planned ones and the rounds
    rounds: int
    extra_runs: int
    undecided: list[str]  # comparisons still undecided at the end
    stopped: str  # why the rounds stopped


def wanted(comparisons: list[Versus], repetitions: dict[tuple, int], most: int) -> dict[tuple, tuple[int, str]]:
    """The cells an undecided throughput comparison needs more runs of (both sides, unless a side has
    ``most`` repetitions already), each with its next repetition and why. A comparison that even many
    more runs would not decide (stats.Comparison.more is None with an interval) is left as it is."""
    out: dict[tuple, tuple[int, str]] = {}
    for v in comparisons:
        c = v.throughput
        if c is None or c.verdict != stats.UNDECIDED or (c.ratio.lo is not None and c.more is None):
            continue
        why = f"until decided: {v.cell.label} against {v.base.label}, throughput {c.ratio}, undecided"
        for cell in (v.cell, v.base):
            have = repetitions.get(cell.cell, 0)
            if have < most and cell.cell not in out:
                out[cell.cell] = (have + 1, why)
    return out


def run_until_decided(path: str, store_path: str, on_plan: Callable = lambda p: None,
                      on_event: Callable[[Event], None] = lambda e: None, on_round: Callable[[Round], None] = lambda r: None,
                      seams: Seams = Seams(), retake_invalid: bool = False, most: int = MAX_REPETITIONS,
                      budget_s: float = BUDGET_S, clock: Callable[[], float] = time.monotonic,
                      overrides: Overrides = Overrides()) -> Decided:
    """``arena run --until-decided``: the planned runs (resumed), then rounds of runs beyond the plan
    for the undecided comparisons, within ``most`` repetitions a cell and ``budget_s`` of wall time
    from the start (a round is started only when its estimate fits in what is left)."""
    start = clock()
    planned = []

    def plan_seen(p) -> None:
        planned.append(p)
        on_plan(p)

    total = run_file(path, store_path, plan_seen, on_event, seams=seams, retake_invalid=retake_invalid,
                     overrides=overrides)
    exp = planned[0].experiment
    rounds = extra = 0
    while True:
        with open_store(store_path) as store:
            res = results(store, exp.name)
        analysis = analyse(res)
        comparisons = [v for a in analysis.answers for v in a.tied + a.undecided + a.twins]
        undecided = [f"{v.cell.label} against {v.base.label}" for v in comparisons
                     if v.throughput is not None and v.throughput.verdict == stats.UNDECIDED]
        reps: dict[tuple, int] = {}
        for r in res.runs:
            reps[r.cell] = max(reps.get(r.cell, 0), r.repetition)
        want = wanted(comparisons, reps, most)
        if not want:
            stopped = ("every comparison with the best is decided" if not undecided else
                       f"the undecided cells have {most} repetitions (--max-repetitions) or need too many more")
            break
        need = len(want) * _run_s(exp)
        if clock() - start + need > budget_s:
            stopped = f"the budget: a round of {len(want)} runs (about {need:.0f} s) would overrun it"
            break
        rounds += 1
        on_round(Round(rounds, want))
        with open_store(store_path, write=True) as store:
            got = run_experiment(exp, store, on_event, seams, extra=want)
        extra += got.done
        total += got
        if not got.done:
            stopped = "no run of the round could be made"
            break
    return Decided(total, rounds, extra, undecided, stopped)


def _run_s(exp: Experiment) -> float:
    """One run beyond the plan: its own server start, warm-up and measured time."""
    return START_S + exp.warmup_s + (exp.duration_s or 0.0)
