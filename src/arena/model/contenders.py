"""The contenders of a tune, pure: every grid point of each calibrated server that fits the memory
bound, predicted (its capacity under the goal by the simulator, or its throughput at a fixed load by
the mean-value model) and ranked; the field raced (the best RACE, PER_SERVER of a server at most);
the reach of those not raced (their capacity at a target REACH wider: model/search.py screens by
it); and what the race learns with (``learner``: search.learned over the simulator's p99). The
search over them: model/search.py; the use case that measures them: app/tune.py."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Callable, Sequence

from arena.model.calibrate import Calibration
from arena.model.capacity import Key
from arena.model.recommend import open_p99, saturation, slo_capacity
from arena.model.search import Contender, Learn, learned
from arena.model.verify import predict
from arena.plan.experiment import Level, ServerConfig
from arena.results.answer import Goal
from arena.servers import catalog

RACE = 6  # contenders raced
PER_SERVER = 2  # at most this many of one server in the race
LEARN_STEPS = 12  # halvings of the rate the race learns a contender's factor at (1/4096 of its saturation)
REACH = 0.2  # a contender's reach: its capacity at a p99 target this much wider (twice the ~10% a
# configuration's p99 is off the simulator's on held-out sweeps, benches/model_check.py)


def contenders_of(calibrations: dict[str, Calibration], space: Callable[[str], list[tuple[int, int | None]]],
               names: dict[Key, str], goal: Goal, load: Level | None, bound: float | None = None,
               map_fn: Callable = map) -> tuple[list[Contender], int]:
    """Every grid point of each server's ``space`` whose memory fits ``bound`` (MiB; None: any),
    predicted (``predicted``, each through ``map_fn``: a process pool's map spreads them over the
    cores), ranked; and how many grid points there were."""
    fit, points = [], 0
    for s, cal in calibrations.items():
        for p, t in space(s):
            points += 1
            key = key_for(s, p, t)
            mem = cal.memory_mib(p, t)
            if key in names and (bound is None or mem is None or mem <= bound):
                fit.append((key, mem, (cal, p, t)))
    got = map_fn(partial(predicted, goal, load), [point for _, _, point in fit])
    return ranked([Contender(key, names[key], x, mem) for (key, mem, _), x in zip(fit, got)]), points


def predicted(goal: Goal, load: Level | None, point: tuple[Calibration, int, int | None]) -> float:
    """A configuration's predicted capacity under the goal's target (the simulator's; ``load`` None),
    or its throughput at the fixed ``load`` where its p99 keeps within the target (the mean-value
    model's; else 0)."""
    cal, p, t = point
    if load is None:
        return capacity_at(goal, point)
    pred = predict(cal, p, t, load.model, load.value)
    return 0.0 if pred.overloaded or not goal.p99_within(pred.p99_ms) else pred.throughput


def with_reach(others: Sequence[Contender], raced: Sequence[Contender], calibrations: dict[str, Calibration],
               goal: Goal, map_fn: Callable = map) -> list[Contender]:
    """``others`` (the contenders not raced), each that could beat the least predicted of ``raced``
    (its saturation is above it) given its ``reach``: the simulator's capacity at a p99 target REACH
    wider (model/search.py screens those the model may rank too low by it)."""
    least = min((c.predicted for c in raced), default=0.0)
    hope = [c for c in others if saturation(calibrations[c.key[0]], c.key[1], c.key[2]) > least]
    wider = replace(goal, p99_ms=goal.p99_ms * (1 + REACH))
    reach = dict(zip([c.key for c in hope], map_fn(partial(capacity_at, wider),
                                                   [(calibrations[c.key[0]], c.key[1], c.key[2]) for c in hope])))
    return [replace(c, reach=reach[c.key]) if c.key in reach else c for c in others]


def capacity_at(goal: Goal, point: tuple[Calibration, int, int | None]) -> float:
    """A configuration's capacity within the ``goal``'s latency target as the simulator predicts it."""
    cal, p, t = point
    return slo_capacity(cal, p, t, goal, sim=True)


def learner(calibrations: dict[str, Calibration], contenders: Sequence[Contender]) -> Learn:
    """What the race learns with (search.learned): each contender's predicted capacity, and the p99
    against the rate of the simulator that predicted it, from its server's calibration."""
    def p99_at(key: Key, rate: float) -> float:
        return open_p99(calibrations[key[0]], key[1], key[2], rate, sim=True)

    def top(key: Key) -> float:
        return saturation(calibrations[key[0]], key[1], key[2])

    return partial(learned, {c.key: c.predicted for c in contenders}, p99_at, top, steps=LEARN_STEPS)


def ranked(contenders: Sequence[Contender]) -> list[Contender]:
    """Best predicted first (to 0.1 req/s); of those predicted alike, the one that takes less memory."""
    return sorted(contenders, key=lambda c: (-round(c.predicted, 1), c.memory_mib if c.memory_mib is not None else 0.0))


def race_field(ranked: list[Contender]) -> list[Contender]:
    """The best RACE, at most PER_SERVER of a server where there are several. Thread counts the model
    predicts alike are raced too: where it cannot tell them apart, the runs can (leaving all but
    one of them out chose a configuration 13% below the best in benches/tune_efficiency.py)."""
    out: list[Contender] = []
    servers = len({c.key[0] for c in ranked})
    most = max(PER_SERVER, -(-RACE // max(servers, 1)))
    for c in ranked:
        if sum(o.key[0] == c.key[0] for o in out) >= most:
            continue
        out.append(c)
        if len(out) == RACE:
            break
    return out


def key_of(c: ServerConfig) -> Key:
    return c.server, c.processes, c.threads


def key_for(server: str, processes: int | None, threads: int | None) -> Key:
    """A grid point's key as its configuration's (key_of): a knob the server does not have is None."""
    knobs = catalog.get_server(server).knobs
    return server, processes if "processes" in knobs else None, threads if "threads" in knobs else None
