"""Whether a run can be trusted: the validity rules, pure functions of its load result (and of what
the runner saw of its server and the machine), the first cause first. ``arena run`` and ``arena
load`` judge by the same rules; the report's method section states them."""

from __future__ import annotations

import math

from arena.results.load import LoadResult

OTHERS_MAX = 0.05  # by default, what others may take of the run's CPUs (speed.others_cores; the counters tick in 10 ms)


def validity_flags(result: LoadResult, *, error_threshold: float, drift_threshold: float,
                   server_died: bool, processes_lost: tuple[int, int] | None,
                   slowdown: float | None = None, speed_threshold: float | None = None,
                   requests: int | None = None, others_share: float | None = None,
                   others_threshold: float = OTHERS_MAX) -> list[str]:
    """Why a run cannot be trusted (empty: valid), in the order of cause before consequence: no
    request succeeded (a closed port: the refusals, before the generator's busy reconnecting); the
    generator saturated, paused (stopped or starved: then a gap in the answers is its, not the
    server's stall) or could not open its connections; the server or one of its processes died;
    errors (transport errors and answers whose status is not expected) above the threshold; more
    than UNSENT_MAX of the requests due never sent; a run bounded by ``requests`` that answered
    fewer (its tool was stopped at its time limit); a stall (stall()); throughput drifting between
    the run's halves beyond counting noise; processes other than Arena's took more than ``others_threshold``
    of the run's CPUs over its window (``others_share``, from speed.others_cores); the machine ran slower
    around the run than usual (``slowdown``, from speed.Reference: every check) by more than
    ``speed_threshold``. The report's method section states the same rules."""
    flags = []
    m = result.measured
    answered = m.completed + m.errors
    # the first cause first: a target that answered nothing right (a closed port keeps the generator
    # busy reconnecting: its saturation follows from the refusals, it does not explain them)
    if answered == 0:
        flags.append("no answer at all" + _most_errors(m))
    elif m.completed == 0:
        flags.append("no request succeeded" + _most_errors(m))
    if result.saturated:
        flags.append("generator saturated: " + "; ".join(result.saturation_reasons))
    flags += [f"load host {h['name']}: {h['problem']}" for h in result.hosts if h.get("problem")]
    if result.open_failure:
        flags.append(f"the generator could not open every connection asked for ({result.open_failure})")
    if server_died:  # before what it causes: errors, a stall, a drift
        flags.append("the server died during the run")
    if processes_lost is not None:
        flags.append(f"{processes_lost[0]} of the server's {processes_lost[1]} processes exited during the run "
                     "(a worker died or was replaced)")
    if answered and m.errors / answered > error_threshold:
        flags.append(f"errors {m.errors / answered:.1%} of requests (threshold {error_threshold:.1%})")
    due = (m.sent or 0) + (m.unsent or 0)
    if m.unsent and m.unsent / due > UNSENT_MAX:
        flags.append(f"{m.unsent} of the {due} requests due were never sent ({m.unsent / due:.1%}; at most "
                     f"{UNSENT_MAX:.0%}): the percentiles cover only those sent, and the missing ones were the latest")
    if requests is not None and answered < requests:
        flags.append(f"answered {answered} of the {requests} requests before the time limit")
    # a pause of the generator itself stops its answers too: it is the cause, not the server
    paused = (result.generator_paused_ms or 0.0) > (result.generator_pause_limit_ms or GENERATOR_PAUSE_MS)
    stalled = None if paused else stall(result)
    if stalled:
        flags.append(stalled)
    drift = throughput_drift(result)
    if drift is not None and drift > drift_threshold:
        flags.append(f"throughput drifted {drift:.0%} between the run's halves (threshold {drift_threshold:.0%})")
    if others_share is not None and others_share > others_threshold:
        flags.append(f"other processes took {others_share:.0%} of the run's CPUs during it (at most {others_threshold:.0%}): "
                     "a neighbour shared the server's CPUs")
    if slowdown is not None and speed_threshold is not None and slowdown > speed_threshold:
        flags.append(f"the machine ran {slowdown:.0%} slower than usual in this experiment in every check before, during "
                     f"and after the run (speed check; threshold {speed_threshold:.0%}): a spell of a slower machine")
    return flags


# Each flag's cause in a few words, for counting runs by cause (the answer's "Left out" line): a
# text each flag of validity_flags holds, with the cause it names, in the order the flags are made
# (a flag names its first match: the errors an answerless run counts are not the "errors" flag's)
KINDS = (("no answer at all", "no answer"), ("no request succeeded", "no request succeeded"),
         ("generator saturated", "generator saturated"), ("load host ", "a load host's problem"),
         ("could not open every connection", "connections not opened"), ("the server died", "the server died"),
         ("processes exited during the run", "a server process exited"), ("errors ", "errors"),
         ("requests due were never sent", "requests never sent"), ("before the time limit", "the time limit"),
         ("stalled:", "a stall"), ("throughput drifted", "throughput drifted"),
         ("other processes took", "a neighbour shared the CPUs"), ("the machine ran", "a slower machine"))


def flag_kind(flag: str) -> str:
    """A validity flag's cause without its run's figures (KINDS): "errors 2.0% of requests ..." ->
    "errors"; a flag of no known kind (a store's older wording) is its own."""
    return next((kind for text, kind in KINDS if text in flag), flag)


# Due requests never sent (the run's window ended with them waiting for a connection) have no
# latency, and they are the ones that waited longest: beyond 1% of those due, even the p99 of the
# rest may miss the worst of them.
UNSENT_MAX = 0.01
# the pause arena-load counted as saturation before it stated its own (LoadResult.generator_pause_limit_ms):
# for results stored from those builds
GENERATOR_PAUSE_MS = 100.0


# How the error classes (results/load.py ERROR_CLASSES) read in a sentence
ERROR_WORDS = {"refused": "connections refused", "connect_timeout": "connections timed out", "reset": "resets",
               "response_timeout": "responses timed out", "malformed": "malformed responses",
               "status": "answers with an unexpected status", "local": "errors on the generator's side"}


def _most_errors(m) -> str:
    """The commonest kind of error of a phase, as ': 1234 connections refused'."""
    if not m.error_counts or not max(m.error_counts.values()):
        return ""
    kind, n = max(m.error_counts.items(), key=lambda kv: kv[1])
    return f": {n} {ERROR_WORDS.get(kind, kind)}"


STALL_P = 1e-4  # how unlikely an interval's count must be, as counting noise, to be called a stall


def poisson_cdf(k: int, mean: float) -> float:
    """P(X <= k) for X ~ Poisson(mean); a normal approximation (continuity-corrected) above a mean of 1000."""
    if mean > 1000:
        return 0.5 * math.erfc(-((k + 0.5 - mean) / math.sqrt(mean)) / math.sqrt(2))
    term = total = math.exp(-mean)
    for i in range(1, k + 1):
        term *= mean / i
        total += term
    return min(1.0, total)


def _whole_intervals(result: LoadResult) -> list:
    """The series points whose interval lies inside the measured window (the last one, cut by the
    end, and the drain after it are left out)."""
    window = result.measured.duration_s
    step = result.settings.interval_s
    return [p for p in result.series if p.t + step <= window + 1e-9]


def dispersion(counts: list[int]) -> float:
    """How much more the intervals' counts spread than Poisson counts would: the index of
    dispersion (variance over mean), at least 1. A workload whose requests take heavy-tailed times
    completes them in bursts, and its counts spread far beyond Poisson's."""
    if len(counts) < 2:
        return 1.0
    mean = sum(counts) / len(counts)
    if mean <= 0:
        return 1.0
    variance = sum((c - mean) ** 2 for c in counts) / (len(counts) - 1)
    return max(1.0, variance / mean)


def stall(result: LoadResult) -> str | None:
    """A stall in either load model: a whole interval of the measured window whose completions are
    far below the run's usual interval, beyond counting noise (as unlikely as STALL_P for a Poisson
    count with the usual interval's mean, and under half of it), while requests were outstanding
    (closed model: always; open: some were sent by then and not all answered). The usual interval
    is the upper quartile of the intervals' counts (nearest rank), so a stall that fills most of a
    run does not become the norm. Where the counts spread beyond Poisson's (dispersion() D above 1:
    a heavy-tailed workload's bursts), an interval is judged as a quasi-Poisson count: its count and
    the usual mean divided by D, with D taken from the intervals from half the usual to twice it
    (the deep dips under test do not excuse themselves, nor does a freeze's catch-up burst); an
    interval without a single completion is judged as a plain Poisson count all the same (a
    heavy-tailed workload slows, a freeze stops). Measured requests are sent from the window's
    start, so an interval that begins before their median response time holds fewer of their
    answers: its usual count is cut by the share of it that lies before then (a run of 3 s answers
    has none in its first 3 s). None: no stall."""
    points = _whole_intervals(result)
    if len(points) < 2:
        return None
    from arena.stats import quantile

    counts = [p.completed for p in points]
    usual = quantile(counts, 0.75)
    spread = dispersion([c for c in counts if usual / 2 <= c <= 2 * usual])
    rt = result.measured.response_time
    first_s = rt.p("50") / 1e6 if rt is not None and rt.count else 0.0  # when measured answers begin, typically
    step = result.settings.interval_s
    sent = answered = 0
    for p in points:
        outstanding = result.model == "closed" or sent + (p.sent or 0) > answered
        sent += p.sent or 0
        answered += p.completed + p.errors
        expected = usual * (1 - min(1.0, max(0.0, (first_s - p.t) / step)))
        d = spread if p.completed else 1.0
        if (outstanding and p.completed < expected / 2
                and poisson_cdf(math.floor(p.completed / d), expected / d) < STALL_P):
            return (f"stalled: {p.completed} completions in the interval at {p.t:g} s against a usual {usual} per "
                    f"interval, with requests outstanding")
    return None


def throughput_drift(result: LoadResult) -> float | None:
    """|first half - second half| / larger half, over the measured window's whole intervals, when
    that difference is beyond counting noise; None otherwise (or with too few intervals).

    Completions in a half are counts: with a and b of them, Poisson noise alone gives |a - b| a
    standard deviation of sqrt(a + b), so a difference under 3 of those is not called drift (at
    ~45 completions a half that is about 40%: slow workloads need longer runs to show drift)."""
    whole = [p.completed for p in _whole_intervals(result)]
    if len(whole) < 2:
        return None
    half = len(whole) // 2
    a, b = sum(whole[:half]), sum(whole[-half:])
    if abs(a - b) <= 3 * math.sqrt(a + b):
        return None
    return abs(a - b) / max(a, b)
