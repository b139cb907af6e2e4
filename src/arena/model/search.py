"""``arena tune``'s search, pure: it decides which runs to make; a measurer makes them. How a rate
is judged and a capacity bracketed: model/capacity.py.

Given contenders ranked by the model's prediction, it
1. **races** them at one load: the given one, or an open rate near the leaders' predicted capacity,
   bracketed (``race_rate``) where every p99 is below RACE_LOW of the target or every run is beyond
   the goal, as neither tells the contenders apart: where their p99s meet the target they tell
   capacity. Every contender gets one run at a rate the race moves on from; where it stays, two runs,
   then a run more a round for those still in;
   a contender is dropped only when it is *surely* worse than the leader (stats.compare: the
   interval of the ratio excludes 1 by more than the threshold), surely beyond a limit of the goal,
   or has no valid run where others had; the race ends when at most ``finalists`` are left, every
   comparison with the leader is decided, or a contender reaches ``most`` runs (successive halving,
   with a statistical test in place of a fixed cut). With no more contenders than finalists, there
   is no race. Where the race is on capacity and the caller gives the model (``learn``), each
   round's runs correct it per configuration (``learned``: a contender's p99 against the model's at
   the same rate; those not raced from their server's and thread count's), and a contender not
   raced that the correction lifts among the finalists joins the race (JOIN a round); at its first
   round, the race runs once each of those not raced whose ``reach`` (the capacity they would have
   were their own p99 as far below the model's as a configuration's may be) tops the finalists
   (SCREEN at most): their neighbours cannot tell the model that, their own run can;
2. finds each finalist's **capacity** (no load given): the highest open rate whose p99 keeps within
   the target with errors within their limit, by a bracketing search from the model's estimate and
   the race's rates (up by UP until a rate fails, down by DOWN until one passes, then halving the
   bracket in log space until it is within ``within``: WITHIN by default), and confirms the highest
   passing rate with CONFIRM runs. The choice is the highest capacity; of capacities within the threshold of it, the
   one that takes the least memory; a finalist whose bracket reaches above the choice's is tied;
3. stops starting runs when the next would overrun the budget, and says what more time would buy.

Going down while every run is beyond the goal (the race, or a capacity search with no rate passed
yet) ends where the p99s show no lower rate can meet the target (``least_p99``: the p99 curve is
convex in the rate, so a line through two rates tried bounds it from below at rate 0), else at
FLOOR of the first rate: nothing meets the goal, and the lowest p99 seen is the best achievable.

A rate passes when the median p99 of its valid runs keeps within the target and their median error
share within the limit; a rate with no valid run fails (overload is what usually invalidates an
open-model run: errors, the arrival rate not kept). Every run it asks for is keyed by contender,
load level and repetition, so a second search over the same stored runs asks for nothing it has:
an interrupted search resumes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from arena import stats
from arena.plan.experiment import Level
from arena.results.answer import Goal
from arena.model.capacity import (CONFIRM, DOWN, FLOOR, UP, WITHIN, Ask, Capacity, Key, Measurer, Sample, bracket,
                                  median_or, median_text, next_rate, out_of_reach, passes, probe_text, result, rounded,
                                  values)

RACE_RATE = 0.9  # the race's open rate: this share of the finalists' predicted capacity
RACE_LOW = 0.5  # a race where every p99 is below this share of the target moves up (too easy to tell)
RACE_NARROW = 0.15  # the race's rates too easy and too hard this close (hard / easy - 1): it stays at the easy one
FIRST_RUNS = 2  # a contender's runs in the race's first round (two: the least that gives an interval)
SEARCH_RUNS = 9  # runs a capacity search takes, about: a few steps each way, halvings, CONFIRM
LEARN_MOST = 2.0  # a contender's capacity learned from the race: at most this factor off its prediction
JOIN, JOIN_MOST = 2, 4  # contenders the race's runs may lift into it: a round, and in all
SCREEN = 8  # contenders not raced that the race's first round screens with a run each, at most



@dataclass(frozen=True)
class Contender:
    key: Key
    name: str
    predicted: float  # req/s: the model's capacity within the goal (or throughput at the load given)
    memory_mib: float | None = None  # the model's
    # req/s: its capacity were its p99 as far below the model's as a configuration's may be (None: not
    # asked); wide of ``predicted`` where its p99 is flat in the rate until near saturation
    reach: float | None = None


@dataclass(frozen=True)
class Step:
    stage: str  # "race", "drop", "capacity", "confirm", "stop"
    text: str


@dataclass
class Tuning:
    """What the search did and found."""

    load: Level | None  # the load given (None: capacity was searched)
    within: float = WITHIN  # a capacity is found where its bracket is this narrow (hi / lo - 1)
    race_level: Level | None = None  # the last rate the race ran at: where it ended
    race_levels: list[Level] = field(default_factory=list)  # every rate the race ran at, in order
    raced: list[Contender] = field(default_factory=list)
    lifted: list[Key] = field(default_factory=list)  # of those raced: the ones the race's runs lifted into it
    screened: list[Key] = field(default_factory=list)  # not raced, run once where the race first compared
    dropped: dict[Key, str] = field(default_factory=dict)  # contender -> why
    finalists: list[Key] = field(default_factory=list)
    survivors: list[Key] = field(default_factory=list)  # in the race to its end (the finalists first)
    capacities: dict[Key, Capacity] = field(default_factory=dict)
    choice: Key | None = None
    tied: list[Key] = field(default_factory=list)  # not shown to be worse than the choice
    steps: list[Step] = field(default_factory=list)
    runs: int = 0  # runs asked for (made now or found stored)
    stopped: str = ""  # why the search ended
    more: list[str] = field(default_factory=list)  # what more time would buy
    leader: Key | None = None  # the race's leader when it last ended a round
    none_meets: bool = False  # nothing kept within the goal at any rate tried
    best_p99_ms: float | None = None  # then: the lowest median p99 seen, and where
    best_p99_at: tuple[Key, Level] | None = None
    on_step: Callable[[Step], None] = field(default=lambda s: None, repr=False, compare=False)

    def say(self, stage: str, text: str) -> None:
        self.steps.append(Step(stage, text))
        self.on_step(self.steps[-1])


# ---------------------------------------------------------------------- the race's rates and what it learns


def race_rate(easy: float | None, hard: float | None) -> float | None:
    """The race's next open rate, from the highest rate tried where every p99 was far within the target
    (``easy``) and the lowest where every run was beyond the goal (``hard``): up by UP or down by DOWN
    while one end is missing, then the middle in log space (None: the two are within RACE_NARROW)."""
    if hard is None:
        return rounded(easy * UP)
    if easy is None:
        return rounded(hard * DOWN)
    return None if hard / easy - 1 <= RACE_NARROW else rounded(math.sqrt(easy * hard))


def learned(predicted: dict[Key, float], p99_at: Callable[[Key, float], float], top: Callable[[Key], float],
            rate: float, measured: dict[Key, float], steps: int = 30) -> dict[Key, float]:
    """Each contender's predicted capacity corrected by the race's runs at ``rate`` (``measured``: the
    median p99 of each contender run there, ms). A contender measured at ``rate`` behaves as the model
    does at the rate ``r`` where its p99 (``p99_at(key, r)``, rising to saturation at ``top(key)``) is
    the one measured: its capacity is the predicted one times rate / r (LEARN_MOST either way: near
    rate 0 the model's p99 is flat, and a run's noise is no measure there; ``steps`` halvings find
    ``r``). A contender not measured takes the geometric mean of the factors measured at its
    server's thread count, else at its server; one of a server nothing was measured of keeps its
    prediction. The model learns per configuration, and its neighbours with it (a contender
    measured better than predicted lifts those of its server and thread count)."""
    factor: dict[Key, float] = {}
    for key, p99 in measured.items():
        hi = top(key)
        if key not in predicted or not hi > 0 or not math.isfinite(p99):
            continue
        lo, up = 0.0, hi * (1 - 1e-6)
        if p99 >= p99_at(key, up):  # beyond the model's at saturation: as slow as it can be
            r = up
        else:
            for _ in range(steps):
                mid = (lo + up) / 2
                lo, up = (mid, up) if p99_at(key, mid) < p99 else (lo, mid)
            r = (lo + up) / 2
        factor[key] = min(LEARN_MOST, max(1 / LEARN_MOST, rate / r)) if r > 0 else LEARN_MOST

    def mean(keys: list[Key]) -> float | None:
        return math.exp(sum(math.log(factor[k]) for k in keys) / len(keys)) if keys else None

    out = {}
    for key, x in predicted.items():
        f = factor.get(key)
        if f is None:
            f = (mean([k for k in factor if k[0] == key[0] and k[2:] == key[2:]])
                 or mean([k for k in factor if k[0] == key[0]]) or 1.0)
        out[key] = x * f
    return out


def figure_of(load: Level | None) -> tuple[str, bool]:
    """What the race compares: throughput (higher is better) at a closed load, else p99 (lower)."""
    return ("throughput", True) if load is not None and load.model == "closed" else ("p99_ms", False)


# ---------------------------------------------------------------------- the search


Learn = Callable[[float, dict[Key, float]], dict[Key, float]]  # (rate, median p99 per contender) -> capacities


def search(contenders: Sequence[Contender], goal: Goal, load: Level | None, measurer: Measurer, *,
           budget_s: float, run_s: float, clock: Callable[[], float], finalists: int = 2, most: int = 5,
           threshold: float = stats.THRESHOLD, on_step: Callable[[Step], None] = lambda s: None,
           others: Sequence[Contender] = (), learn: Learn | None = None, within: float = WITHIN) -> Tuning:
    """Race ``contenders`` (best predicted first), then find the finalists' capacity (``load`` None)
    within ``budget_s`` of ``clock`` (a run taken as ``run_s`` seconds). With ``learn`` (no load
    given: the race is on capacity), each round's runs correct the predictions (``learned``), and a
    contender of ``others`` (those not raced) that the correction lifts among the finalists joins
    the race, JOIN a round at most, where the budget has room for its runs. A finalist's capacity is
    found where its bracket is ``within`` wide."""
    start = clock()
    t = Tuning(load, within, on_step=on_step)

    def afford(n: int) -> bool:
        return clock() - start + n * run_s <= budget_s

    def ask(asks: list[Ask]) -> bool:
        if not asks:
            return True
        if not afford(len(asks)):
            t.stopped = f"the budget: {len(asks)} more run(s) (about {len(asks) * run_s:.0f} s) would overrun it"
            return False
        measurer.measure(asks)
        t.runs += len(asks)
        return True

    if not contenders:
        t.stopped = "no contender fits the limits"
        return t
    # what the budget allows: each finalist's capacity search (about SEARCH_RUNS runs), then two runs
    # a contender raced; too little for a race: the best predicted go straight to their capacity
    room = (budget_s - (clock() - start)) / run_s
    left = int(room) if math.isfinite(room) else 1 << 30
    if load is None and left < finalists * SEARCH_RUNS + (finalists + 1) * FIRST_RUNS:
        finalists = 1  # room for one capacity search after a race, not for more
    reserve = finalists * SEARCH_RUNS if load is None else 0
    size = min(len(contenders), max(0, (left - reserve) // FIRST_RUNS))
    if load is None and size <= finalists:
        n = max(1, min(finalists, len(contenders), left // SEARCH_RUNS))
        t.raced = list(contenders[:n])
        t.finalists = [c.key for c in t.raced]
        if len(contenders) > n:
            t.say("race", f"no race: {left} run(s) fit in the budget; the capacity of the best predicted: "
                          + ", ".join(c.name for c in t.raced))
    else:
        if size < len(contenders):
            t.say("race", f"{left} run(s) fit in the budget: the race takes the best {size} predicted of {len(contenders)}")
        t.raced = list(contenders[:max(size, 1)])

        def spare(n: int) -> bool:  # n more race runs leave the finalists' capacity searches their room
            rest = (budget_s - (clock() - start)) / run_s - n
            return rest >= reserve

        _race(t, goal, load, measurer, ask, finalists, most, threshold, spare,
              list(others) if learn is not None and load is None else [], learn)
    if load is None and t.finalists and not t.stopped:
        for key in t.finalists:
            if not _capacity(t, key, goal, measurer, ask, next(c for c in t.raced if c.key == key)):
                break
    _choose(t, goal, load, measurer, threshold)
    if not t.stopped:
        t.stopped = "done"
    t.more = _more(t, goal, measurer, run_s)
    return t


@dataclass
class _Bracket:
    """Where the race's open rate stands (no load given): ``easy`` the highest rate where every p99 was
    below RACE_LOW of the target, ``hard`` the lowest where every run was beyond the goal; neither
    tells the contenders apart, so the race moves until it runs where it is neither (``settled``), or
    the bracket is narrow."""

    settled: bool
    easy: float | None = None
    hard: float | None = None
    seen: str = ""  # what the last rate showed, where the race moves on from it

    def judge(self, level: Level, got: dict[Key, list[Sample]], beyond: bool, goal: Goal) -> None:
        slowest = max(median_or(s, "p99_ms", False) for s in got.values())  # median p99 (inf: no valid run)
        if beyond:
            self.hard, self.seen = level.value, "every run beyond the goal"
        elif goal.p99_ms is not None and goal.p99_within(slowest / RACE_LOW):
            self.easy, self.seen = level.value, f"every p99 below {100 * RACE_LOW:g}% of the target"
        else:
            self.settled = True  # the contenders' p99s meet the target here: the race stays

    def next_rate(self, t: "Tuning", level: Level, alive: list[Key], measurer: Measurer, goal: Goal) -> float | None:
        """The rate the race goes on at (``level``'s where it stays), or None where it ends: going
        down, at the floor of the first rate, or where no lower rate can pass."""
        rate = race_rate(self.easy, self.hard)
        if self.easy is None:
            if rate < t.race_levels[0].value * FLOOR:
                return None
            least = out_of_reach(measurer, alive, [lv.value for lv in t.race_levels], goal)
            if least is not None:
                t.say("race", f"every run beyond the goal down to {level.label}, and no p99 falls fast enough "
                              f"for a lower rate to meet it (each stays above {least:.0f} ms): the race ends")
                return None
        if rate is None:  # narrow: the race stays at the easy end (runs within the goal tell more than none)
            self.settled, rate = True, self.easy
        return rate


def _race(t: Tuning, goal: Goal, load: Level | None, measurer: Measurer, ask, finalists: int, most: int,
          threshold: float, spare: Callable[[int], bool], others: list[Contender], learn: Learn | None) -> None:
    ranked = t.raced
    lead = ranked[min(finalists, len(ranked)) - 1]
    level = load or Level("open", rounded(RACE_RATE * max(lead.predicted, 1.0)))  # t.race_level once run at
    where = _Bracket(settled=load is not None)
    figure, higher = figure_of(load)
    alive = [c.key for c in ranked]
    names = {c.key: c.name for c in ranked}
    t.say("race", f"race of {len(alive)} at {level.label}, compared on {figure.replace('_ms', '')}: "
                  + ", ".join(names[k] for k in alive))
    # where the race only passes through, one run each tells which way it goes; where it stays, a round
    # is FIRST_RUNS runs each (an interval), then one more a round
    reps, first = (FIRST_RUNS if where.settled else 1), True
    screen = learn is not None and bool(others)  # once, where the race first compares
    while True:
        asks = [Ask(k, level, r, f"tune: race at {level.label}, run {r}") for k in alive
                for r in range(1, reps + 1) if len(measurer.samples(k, level)) < r]
        if not first and asks and not spare(len(asks)):
            t.say("race", "the race ends here: the rest of the budget is kept for the capacity search")
            break
        if not ask(asks):
            break
        first = False
        t.race_level = level  # the race's rates are those it has runs at: where it ends is where it ran
        if level not in t.race_levels:
            t.race_levels.append(level)
        got = {k: measurer.samples(k, level) for k in alive}
        beyond = all(not passes([s], goal) for k in alive for s in got[k])
        rate: float | None = level.value
        if not where.settled:
            where.judge(level, got, beyond, goal)
        if not where.settled and (rate := where.next_rate(t, level, alive, measurer, goal)) is None:
            break
        if rate == level.value and reps < FIRST_RUNS:
            reps = FIRST_RUNS  # the race stays here: a full first round before any comparison
            continue
        if where.settled or not beyond:
            t.say("race", f"round at {level.label}: " + "; ".join(
                f"{names[k]}: {median_text(got[k], figure)} over {len(got[k])} run(s)" for k in alive))
        if rate != level.value:
            back = Level("open", rate) in t.race_levels
            t.say("race", f"{where.seen} at {level.label}: the race {'goes back' if back else 'moves'} to {rate:g} req/s")
            level = Level("open", rate)
            reps = max(len(measurer.samples(k, level)) for k in alive) + 1 if back else 1
            continue
        undecided = _round(t, alive, got, goal, load, threshold, names)
        if undecided is None:
            break
        if screen:
            screen = False
            _screen(t, level, measurer, alive, others, learn, ask, spare, finalists)
        if others and learn is not None and _lift(t, level, measurer, alive, names, others, learn, reps, spare,
                                                  finalists):
            continue  # the newcomers' runs at this rate, then the comparisons again
        if len(alive) <= finalists or not undecided or reps >= most:
            break
        reps += 1
    ran = t.race_level or level
    alive.sort(key=lambda k: median_or(measurer.samples(k, ran), figure, higher))
    t.survivors = list(alive)
    t.finalists = alive[:finalists]
    if alive:
        t.say("race", f"finalists: {', '.join(names[k] for k in t.finalists)}"
                      + (f" (of {len(alive)} not shown worse)" if len(alive) > finalists else ""))


def _round(t: Tuning, alive: list[Key], got: dict[Key, list[Sample]], goal: Goal, load: Level | None,
           threshold: float, names: dict[Key, str]) -> bool | None:
    """A round's judgement: each contender out of the goal dropped, then each surely worse than the
    leader; whether a comparison with the leader is undecided (None: the race ends, none left to
    compare or none with a valid run)."""
    figure, higher = figure_of(load)
    any_valid = any(s.valid for k in alive for s in got[k])
    for k in list(alive):
        why = _out_of_goal(got[k], goal, load, any_valid)
        if why:
            alive.remove(k)
            t.dropped[k] = why
            t.say("drop", f"{names[k]}: {why}")
    if not alive:
        return None
    leader = _leader(alive, got, figure, higher)
    if not values(got[leader], figure):  # a fixed load no contender ran validly at: none to compare
        t.say("race", f"no valid run at {t.race_level.label}: the race ends")
        return None
    t.leader = leader
    undecided = False
    for k in [k for k in alive if k != leader]:
        c = stats.compare(values(got[k], figure), values(got[leader], figure), higher, threshold)
        if c.verdict == stats.WORSE:
            alive.remove(k)
            t.dropped[k] = f"surely worse than {names[leader]}: {figure.replace('_ms', '')} {c.ratio}"
            t.say("drop", f"{names[k]}: {t.dropped[k]}")
        elif c.verdict == stats.UNDECIDED:
            undecided = True
    return undecided


def _lift(t: Tuning, level: Level, measurer: Measurer, alive: list[Key], names: dict[Key, str],
          others: list[Contender], learn: Learn, reps: int, spare: Callable[[int], bool], finalists: int) -> list[Key]:
    """The contenders of ``others`` the race's runs at ``level`` lift among the finalists (above the
    ``finalists``-th best capacity learned of those still in the race), best first, JOIN a round and
    JOIN_MOST a race at most, each while the budget has room for its ``reps`` runs: moved into the
    race (``alive``), each said with what was learned."""
    room = min(JOIN, JOIN_MOST - len(t.lifted))
    learned = _learned(t, level, measurer, learn, alive, finalists)
    if room <= 0 or learned is None:
        return []
    est, cut, bar = learned
    joined: list[Key] = []
    for c in sorted((c for c in others if est.get(c.key, 0.0) > bar), key=lambda c: -est[c.key])[:room]:
        if not spare(reps * (len(joined) + 1)):
            break
        others.remove(c)
        t.raced.append(c)
        alive.append(c.key)
        names[c.key] = c.name
        joined.append(c.key)
        t.lifted.append(c.key)
        t.say("race", f"{c.name} joins the race: the runs at {level.label} put its capacity at about "
                      f"{est[c.key]:.0f} req/s (predicted {c.predicted:.0f}), above {names[cut]}'s {bar:.0f}")
    return joined


def _screen(t: Tuning, level: Level, measurer: Measurer, alive: list[Key], others: list[Contender], learn: Learn,
            ask, spare: Callable[[int], bool], finalists: int) -> None:
    """Where the model may rank a contender of ``others`` too low, one run of it at ``level``: its
    ``reach``, corrected as the race's runs correct its server's, above the ``finalists``-th best
    capacity learned of those in the race; the SCREEN highest, as many as the budget leaves room for.
    Its own run then corrects its capacity (``_lift``), where its neighbours' could not: a
    configuration's p99 is off the model's by its own factor, and where the p99 is flat in the rate
    that factor alone can put its capacity anywhere up to saturation."""
    learned = _learned(t, level, measurer, learn, alive, finalists)
    if learned is None:
        return
    est, _, bar = learned

    def hope(c: Contender) -> float:  # its reach, by the factor the race's runs put on its prediction
        return c.reach * est.get(c.key, c.predicted) / c.predicted if c.predicted > 0 else c.reach

    hopes = sorted((c for c in others if c.reach is not None and hope(c) > bar), key=hope, reverse=True)[:SCREEN]
    n = len(hopes)
    while n and not spare(n):
        n -= 1
    if not n:
        return
    chosen = hopes[:n]
    t.say("race", f"{n} not raced could reach above {bar:.0f} req/s were their p99 as far below the model's as a "
                  f"configuration's may be: a run each at {level.label}: " + ", ".join(c.name for c in chosen))
    if ask([Ask(c.key, level, 1, f"tune: screen at {level.label}") for c in chosen]):
        t.screened.extend(c.key for c in chosen)


def _learned(t: Tuning, level: Level, measurer: Measurer, learn: Learn, alive: list[Key],
             finalists: int) -> tuple[dict[Key, float], Key, float] | None:
    """What the runs at ``level`` teach: the capacities ``learn`` puts on the contenders from the median
    p99 of each one raced or screened with a valid run there, and of those still in the race
    (``alive``) the ``finalists``-th best by them with its capacity, the bar to pass. None before any
    such run."""
    keys = [c.key for c in t.raced] + t.screened
    measured = {k: stats.median(v) for k in keys if (v := values(measurer.samples(k, level), "p99_ms"))}
    if not measured:
        return None
    est = learn(level.value, measured)
    ranked = sorted(alive, key=lambda k: -est.get(k, 0.0))
    cut = ranked[min(finalists, len(ranked)) - 1]
    return est, cut, est.get(cut, 0.0)


def _out_of_goal(samples: Sequence[Sample], goal: Goal, load: Level | None, any_valid: bool) -> str:
    """Why a contender is out of the race whatever the others do ('' where it is not)."""
    if any_valid and len(samples) >= FIRST_RUNS and not any(s.valid for s in samples):
        flags = sorted({f for s in samples for f in s.flags})
        return "no valid run" + (f" ({', '.join(flags)})" if flags else "") + " where others had"
    valid = [s for s in samples if s.valid]
    mem = [s.memory_mib for s in valid if s.memory_mib is not None]
    if goal.memory_mib is not None and len(mem) >= FIRST_RUNS and not goal.memory_within(min(mem)):
        return f"memory {min(mem):.0f} MiB or more > {goal.memory_mib:g} MiB in every run"
    p99 = [s.p99_ms for s in valid if s.p99_ms is not None]
    if load is not None and goal.p99_ms is not None and len(p99) >= FIRST_RUNS and not goal.p99_within(min(p99)):
        return f"p99 {min(p99):.0f} ms or more > {goal.p99_ms:g} ms in every run at {load.label}"
    return ""


def _leader(alive: list[Key], got: dict[Key, list[Sample]], figure: str, higher: bool) -> Key:
    return min(alive, key=lambda k: median_or(got[k], figure, higher))


def _capacity(t: Tuning, key: Key, goal: Goal, measurer: Measurer, ask, c: Contender) -> bool:
    """Find one finalist's capacity; False where the budget stopped it."""
    history: dict[float, bool] = {}
    for level in t.race_levels:
        if level.model == "open" and measurer.samples(key, level):
            history[level.value] = passes(measurer.samples(key, level), goal)
    start = c.predicted if c.predicted > 0 else (t.race_levels[0].value if t.race_levels else 1.0)
    confirming: set[float] = set()

    def probe(rate: float, runs: int, why: str) -> bool:
        """Judge ``rate`` on ``runs`` runs there (those stored count: a resumed search makes none again)."""
        level = Level("open", rate)
        have = len(measurer.samples(key, level))
        if not ask([Ask(key, level, n, f"tune: {why} of {c.name}") for n in range(have + 1, runs + 1)]):
            return False
        got = measurer.samples(key, level)
        history[rate] = passes(got, goal)
        t.say(why.split()[0], f"{c.name} at {level.label}: {probe_text(got, history[rate])}")
        return True

    while True:
        lo, hi = bracket(history)
        r = None if hi is None and lo is not None and lo >= start / FLOOR else next_rate(history, start, t.within)
        least = out_of_reach(measurer, [key], list(history), goal) if lo is None and r is not None else None
        if least is not None:  # going down, and no lower rate can pass
            t.say("capacity", f"{c.name}: beyond the goal down to {min(history):g} req/s, and its p99 falls too "
                              f"slowly for a lower rate to meet it (it stays above {least:.0f} ms)")
            break
        if r is not None:  # search on
            if not probe(r, 1, "capacity"):
                break
            continue
        if lo is None:  # even the lowest rate tried failed
            break
        if lo not in confirming:  # CONFIRM runs there (those stored count); a failure moves the bracket down
            confirming.add(lo)
            if not probe(lo, CONFIRM, "confirm the capacity"):
                break
            continue
        break  # confirmed
    t.capacities[key] = result(key, history, measurer)
    return not t.stopped


def _choose(t: Tuning, goal: Goal, load: Level | None, measurer: Measurer, threshold: float) -> None:
    if load is None:
        found = [c for c in t.capacities.values() if c.lo is not None]
        if not found:
            if not t.stopped:  # searched to the end: nothing met the goal (else the budget cut it short)
                _none_meets(t, measurer)
            return
        best = max(found, key=lambda c: c.lo)
        # of the capacities found as high (within the threshold), the one that takes the least memory
        same = [c for c in found if c.lo * (1 + threshold) >= best.lo]
        best = min(same, key=lambda c: (_memory(measurer, c), -c.lo))
        t.choice = best.key
        # tied: a finalist whose capacity may be as high (its bracket reaches the best's lowest end)
        t.tied = [c.key for c in found if c.key != best.key and (c.hi is None or c.hi > best.lo * (1 + threshold))]
        # never searched (a finalist the budget left, a survivor of the race): not shown worse either
        t.tied += [k for k in t.survivors + t.finalists if k not in t.capacities and k not in t.tied]
        return
    figure, higher = figure_of(load)
    within = [k for k in t.finalists if passes(measurer.samples(k, load), goal)]
    if not within:
        if not t.stopped:
            _none_meets(t, measurer)
        return
    t.choice = within[0]
    best = values(measurer.samples(t.choice, load), figure)
    for k in within[1:]:
        c = stats.compare(values(measurer.samples(k, load), figure), best, higher, threshold)
        if c.verdict != stats.WORSE:
            t.tied.append(k)


def _memory(measurer: Measurer, c: Capacity) -> float:
    """The median PSS (MiB) of the valid runs at a capacity found (inf without a figure)."""
    mem = [s.memory_mib for s in measurer.samples(c.key, Level("open", c.lo)) if s.valid and s.memory_mib]
    return stats.median(mem) if mem else math.inf


def _none_meets(t: Tuning, measurer: Measurer) -> None:
    """Nothing passed: the lowest median p99 seen, and where (the best achievable here)."""
    t.none_meets = True
    best: tuple[float, Key, Level] | None = None
    levels = set(t.race_levels) | {Level("open", r) for c in t.capacities.values() for r, _, _ in c.probes}
    for c in t.raced:
        for lv in levels:
            if lv is None:
                continue
            p99 = values(measurer.samples(c.key, lv), "p99_ms")
            if p99 and (best is None or stats.median(p99) < best[0]):
                best = (stats.median(p99), c.key, lv)
    if best is not None:
        t.best_p99_ms, t.best_p99_at = best[0], (best[1], best[2])


def _more(t: Tuning, goal: Goal, measurer: Measurer, run_s: float) -> list[str]:
    """What more time would buy, each with the runs and seconds it would take."""
    out = []
    names = {c.key: c.name for c in t.raced}
    if t.choice is None and t.stopped.startswith("the budget"):
        runs = (len(t.raced) - len(t.dropped)) * FIRST_RUNS + (0 if t.load else 8 + CONFIRM)
        lead = f"; the race's leader so far: {names[t.leader]}" if t.leader is not None else ""
        out.append(f"an answer: the race and {'a capacity search' if t.load is None else 'its last round'} need "
                   f"about {runs} more run(s) (~{runs * run_s:.0f} s){lead}")
    level = t.race_level
    figure, higher = figure_of(t.load)
    if level is not None and t.choice is not None:
        mine = values(measurer.samples(t.choice, level), figure)
        for k in t.tied:
            theirs = values(measurer.samples(k, level), figure)
            if not theirs or not mine:  # not both measured there: nothing to tell apart by more runs
                continue
            c = stats.compare(theirs, mine, higher)
            if c.verdict == stats.UNDECIDED and c.more:
                out.append(f"telling {names[k]} from {names[t.choice]} apart: about {c.more} more run(s) each "
                           f"(~{2 * c.more * run_s:.0f} s)")
    for key, cap in t.capacities.items():
        if cap.lo is None:
            continue
        if cap.hi is None:
            out.append(f"{names[key]}: no rate beyond {cap.lo:g} req/s failed yet: the upper end needs 1 or more runs "
                       f"(~{run_s:.0f} s each)")
        elif cap.width is not None and cap.width > t.within:
            steps = math.ceil(math.log2(math.log(1 + cap.width) / math.log(1 + t.within)))
            out.append(f"{names[key]}: capacity between {cap.lo:g} and {cap.hi:g} req/s; {steps} more run(s) "
                       f"(~{steps * run_s:.0f} s) narrow it to {100 * t.within:g}%")
        if not cap.confirmed:
            n = max(CONFIRM - cap.runs_at_lo, 1)
            out.append(f"{names[key]}: {cap.lo:g} req/s is not confirmed: {n} more run(s) there (~{n * run_s:.0f} s)")
    return out
