"""Whether a run can be trusted: the validity rules, pure functions of its load result (and of what
the runner saw of its server and the machine), the first cause first. ``arena run`` and ``arena
load`` judge by the same rules; the report's method section states them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from arena.limits import MiB, memory_text
from arena.results.load_result import LoadResult
from arena.results.run_setup import SCHEDULE

# The experiment's thresholds by default (plan/parse.py reads them from the file)
ERROR_THRESHOLD = 0.01  # errors over answered requests
DRIFT_THRESHOLD = 0.25  # |first half - second half| / larger half
OTHERS_MAX = 0.05  # what others may take of the run's CPUs (speed.others_cores; the counters tick in 10 ms)
# Due requests never sent (the run's window ended with them waiting for a connection) have no
# latency, and they are the ones that waited longest: beyond 1% of those due, even the p99 of the
# rest may miss the worst of them.
UNSENT_MAX = 0.01
# the pause arena-load counted as saturation before it stated its own (LoadResult.generator_pause_limit_ms):
# for results stored from those builds
GENERATOR_PAUSE_MS = 100.0


class Flag(str):
    """Why a run cannot be trusted: the sentence with the run's figures (the string itself) and the
    kind of its rule (``kind``: the cause in a few words, by which runs are counted). A store keeps
    both (results/store.py: flags, flag_kinds)."""

    def __new__(cls, text: str, kind: str) -> "Flag":
        flag = super().__new__(cls, text)
        flag.kind = kind
        return flag

    def __getnewargs__(self) -> tuple[str, str]:
        return str(self), self.kind


@dataclass(frozen=True)
class OutOfMemory:
    """The OOM kills in a run's window (its cgroup's count) and what the runner saw of its server's
    processes: how many there were at the window's start, which of them were gone at its end, and how
    many joined meanwhile (workers the server started in place of those killed)."""
    kills: int
    processes: int
    lost: tuple[int, ...]
    started: int
    limit_mib: float | None  # the run's memory limit
    peak_bytes: int | None  # the set's high-water mark


@dataclass(frozen=True)
class Seen:
    """What a run is judged on: its load result, what the runner saw of its server and the machine,
    and the experiment's thresholds."""
    result: LoadResult
    error_threshold: float
    drift_threshold: float
    server_died: bool
    processes_lost: tuple[int, int] | None
    slowdown: float | None
    speed_threshold: float | None
    requests: int | None
    others_share: float | None
    others_threshold: float
    oom: OutOfMemory | None = None


@dataclass(frozen=True)
class Rule:
    """One validity rule: its ``kind`` (the cause in a few words), ``check`` (the run's flags by it,
    each a sentence with the run's figures; none where it holds), ``describe`` (the rule in the
    report's method section and the reference, where ``{threshold}`` stands for the threshold) and
    ``threshold``: a fixed value (shown in ``unit``), the name of the experiment's key that sets it,
    or None."""
    kind: str
    check: Callable[[Seen], list[str]]
    describe: str
    threshold: float | str | None = None
    unit: str = "%"

    def flags(self, seen: Seen) -> list[Flag]:
        return [Flag(text, self.kind) for text in self.check(seen)]

    def text(self, settings: Mapping[str, float] | None = None) -> str:
        """``describe`` with its threshold: a fixed value, or the experiment's key with its value in
        ``settings`` (its name alone where settings have none)."""
        t = self.threshold
        if t is None:
            return self.describe
        if isinstance(t, str):
            value = (settings or {}).get(t)
            shown = t if value is None else f"{t} ({value:.0%})"
        else:
            shown = f"{t:.0%}" if self.unit == "%" else f"{t:g} {self.unit}"
        return self.describe.format(threshold=shown)


def _answered(m) -> int:
    return m.completed + m.errors


def _out_of_memory(s: Seen) -> list[str]:
    o = s.oom
    if o is None or not o.kills:
        return []
    text = f"out of memory: the kernel killed {o.kills} process{'es' * (o.kills > 1)} of the server"
    text += f" at its {memory_text(o.limit_mib)} limit" if o.limit_mib is not None else ""
    text += f" (peak {o.peak_bytes / MiB:.1f} MiB)" if o.peak_bytes else ""
    if o.lost:  # a killed worker the server replaced at once may have come and gone between readings
        text += (f"; of the {o.processes} it began with, pid {', '.join(map(str, o.lost))} "
                 f"{'is' if len(o.lost) == 1 else 'are'} gone")
    if o.started:
        text += f"; it started {o.started} in {'its' if len(o.lost) == 1 else 'their'} place"
    return [text]


def _no_answer(s: Seen) -> list[str]:
    m = s.result.measured
    return ["no answer at all" + _most_errors(m)] if _answered(m) == 0 else []


def _none_succeeded(s: Seen) -> list[str]:
    m = s.result.measured
    return ["no request succeeded" + _most_errors(m)] if _answered(m) and m.completed == 0 else []


def _saturated(s: Seen) -> list[str]:
    r = s.result
    return ["generator saturated: " + "; ".join(r.saturation_reasons)] if r.saturated else []


def _host_problems(s: Seen) -> list[str]:
    return [f"load host {h['name']}: {h['problem']}" for h in s.result.hosts if h.get("problem")]


def _not_opened(s: Seen) -> list[str]:
    failure = s.result.open_failure
    return [f"the generator could not open every connection asked for ({failure})"] if failure else []


def _server_died(s: Seen) -> list[str]:
    return ["the server died during the run"] if s.server_died else []


def _process_exited(s: Seen) -> list[str]:
    if s.processes_lost is None:
        return []
    lost, of = s.processes_lost
    return [f"{lost} of the server's {of} processes exited during the run (a worker died or was replaced)"]


def _errors(s: Seen) -> list[str]:
    m = s.result.measured
    answered = _answered(m)
    if answered and m.errors / answered > s.error_threshold:
        return [f"errors {m.errors / answered:.1%} of requests (threshold {s.error_threshold:.1%})"]
    return []


def _unsent(s: Seen) -> list[str]:
    m = s.result.measured
    due = (m.sent or 0) + (m.unsent or 0)
    if m.unsent and m.unsent / due > UNSENT_MAX:
        return [f"{m.unsent} of the {due} requests due were never sent ({m.unsent / due:.1%}; at most "
                f"{UNSENT_MAX:.0%}): the percentiles cover only those sent, and the missing ones were the latest"]
    return []


def _time_limit(s: Seen) -> list[str]:
    answered = _answered(s.result.measured)
    if s.requests is not None and answered < s.requests:
        return [f"answered {answered} of the {s.requests} requests before the time limit"]
    return []


def _stalled(s: Seen) -> list[str]:
    # a pause of the generator itself stops its answers too: it is the cause, not the server
    r = s.result
    if (r.generator_paused_ms or 0.0) > (r.generator_pause_limit_ms or GENERATOR_PAUSE_MS):
        return []
    stalled = stall(r)
    return [stalled] if stalled else []


def _drifted(s: Seen) -> list[str]:
    drift = throughput_drift(s.result)
    if drift is not None and drift > s.drift_threshold:
        return [f"throughput drifted {drift:.0%} between the run's halves (threshold {s.drift_threshold:.0%})"]
    return []


def _neighbour(s: Seen) -> list[str]:
    if s.others_share is not None and s.others_share > s.others_threshold:
        return [f"other processes took {s.others_share:.0%} of the run's CPUs during it (at most "
                f"{s.others_threshold:.0%}): a neighbour shared the server's CPUs"]
    return []


def _slower(s: Seen) -> list[str]:
    if s.slowdown is not None and s.speed_threshold is not None and s.slowdown > s.speed_threshold:
        return [f"the machine ran {s.slowdown:.0%} slower than usual in this experiment in every check before, "
                f"during and after the run (speed check; threshold {s.speed_threshold:.0%}): a spell of a slower machine"]
    return []


# The rules in the order of cause before consequence: the kernel's OOM kills first (they explain
# whatever followed: refusals, a dead server, errors); a target that answered nothing right next (a
# closed port keeps the generator busy reconnecting: its saturation follows from the refusals, it
# does not explain them); then the generator's own problems; the server's death before what it
# causes (errors, a stall, a drift); the machine last.
RULES = (
    Rule("out of memory", _out_of_memory, "the kernel's OOM killer ended one of the server's processes at its "
         "memory limit ([[servers]] memory_limit)"),
    Rule("no answer", _no_answer, "no request was answered at all"),
    Rule("no request succeeded", _none_succeeded, "no request succeeded"),
    Rule("generator saturated", _saturated,
         "the generator saturated or paused (its loop did not run for over {threshold}: stopped or starved of CPU)",
         GENERATOR_PAUSE_MS, "ms"),
    Rule("a load host's problem", _host_problems, "one of several load hosts had a problem (its clock, its link)"),
    Rule("connections not opened", _not_opened, "the generator could not open the connections it was asked for"),
    Rule("the server died", _server_died, "the server died"),
    Rule("a server process exited", _process_exited,
         "one of the server's processes exited (a worker died or was replaced)"),
    Rule("errors", _errors, "errors (transport errors, and answers whose status is not expected: by default "
         "anything but 2xx and 3xx) passed {threshold} of the requests answered", "error_threshold"),
    Rule("requests never sent", _unsent, "more than {threshold} of the requests an open load had due were never "
         "sent (they waited longest: the percentiles of the rest may miss them)", UNSENT_MAX),
    Rule("the time limit", _time_limit, "a run bounded by a request count answered fewer before its time limit"),
    Rule("a stall", _stalled, "an interval of its per-second series stalled (far below the run's usual interval, "
         "the upper quartile, beyond counting noise, while requests were outstanding; the noise is Poisson's, "
         "widened by the run's own spread where heavy-tailed requests complete in bursts)"),
    Rule("throughput drifted", _drifted, "its throughput drifted between its halves beyond counting noise and "
         "beyond {threshold} (the first half counted with the answers its lead-in lacks: those to requests in "
         "flight as the window opened, about the throughput times the median response time)", "drift_threshold"),
    Rule("a neighbour shared the CPUs", _neighbour, "processes other than Arena's took more than {threshold} of "
         "the run's CPUs over its window (the kernel's per-CPU busy and stolen time less the CPU of Arena's own "
         "groups: a neighbour)", "others_threshold"),
    Rule("a slower machine", _slower, "the machine ran slower than usual in every speed check by more than "
         "{threshold}: a fixed unit of interpreter work is timed on the server's and services' CPUs before, every "
         "half second during, and after each run, and the fastest of them is compared with the experiment's "
         "median, so a spell of a slower shared machine (a sibling hyper-thread, frequency) is not taken for the "
         "configuration", "speed_threshold"),
)


def validity_flags(result: LoadResult, *, error_threshold: float, drift_threshold: float,
                   server_died: bool, processes_lost: tuple[int, int] | None,
                   slowdown: float | None = None, speed_threshold: float | None = None,
                   requests: int | None = None, others_share: float | None = None,
                   others_threshold: float = OTHERS_MAX, oom: OutOfMemory | None = None) -> list[Flag]:
    """Why a run cannot be trusted (empty: valid): the flags of RULES in their order, the first
    cause first. ``slowdown`` is from speed.Reference (every check), ``others_share`` from
    speed.others_cores; ``requests`` bounds a run by a request count; ``oom``: the OOM kills in its
    window (the runner's, from its cgroup)."""
    seen = Seen(result, error_threshold, drift_threshold, server_died, processes_lost, slowdown, speed_threshold,
                requests, others_share, others_threshold, oom)
    return [flag for rule in RULES for flag in rule.flags(seen)]


def method(settings: Mapping[str, float] | None = None) -> str:
    """The rules as the report's method section states them, with the experiment's thresholds."""
    return "A run is invalid when " + "; or ".join(r.text(settings) for r in RULES) + "."


# How the error classes (results/load_result.py ERROR_CLASSES) read in a sentence
ERROR_WORDS = {"refused": "connections refused", "connect_timeout": "connections timed out", "reset": "resets",
               "response_timeout": "responses timed out", "malformed": "malformed responses",
               "status": "answers with an unexpected status", "local": "errors on the generator's side",
               "capture": "answers without a value their session captures"}


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


def answers_begin_s(result: LoadResult) -> float:
    """When the answers to the window's own requests typically begin: its median response time (from
    the intended send), in seconds; 0 without one."""
    rt = result.measured.response_time
    p50 = rt.p("50") if rt is not None and rt.count else None
    return p50 / 1e6 if p50 is not None else 0.0


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
    has none in its first 3 s: answers_begin_s(), which throughput_drift() counts too). None: no
    stall."""
    points = result.whole_intervals
    if len(points) < 2:
        return None
    from arena.stats import quantile

    scheduled = result.settings.arrival == SCHEDULE  # a profile's quiet seconds are its own, not stalls
    counts = [p.completed for p in points]
    usual = quantile(counts, 0.75)
    spread = dispersion([c for c in counts if usual / 2 <= c <= 2 * usual])
    first_s = answers_begin_s(result)
    step = result.settings.interval_s
    sent = answered = 0
    for p in points:
        outstanding = result.model == "closed" or sent + (p.sent or 0) > answered
        sent += p.sent or 0
        answered += p.completed + p.errors
        base = (p.sent or 0) if scheduled else usual
        expected = base * (1 - min(1.0, max(0.0, (first_s - p.t) / step)))
        d = spread if p.completed and not scheduled else 1.0
        if (outstanding and p.completed < expected / 2
                and poisson_cdf(math.floor(p.completed / d), expected / d) < STALL_P):
            against = f"{base} sent in it" if scheduled else f"a usual {usual} per interval"
            return (f"stalled: {p.completed} completions in the interval at {p.t:g} s against {against}, with "
                    f"requests outstanding")
    return None


def lead_in(result: LoadResult, within_s: float) -> float:
    """The answers the window's first ``within_s`` seconds lack because its measured requests are
    sent from its start: their first answers come a response time in, and the answers in between
    (to requests sent before it, in a warm-up) count with the warm-up or nowhere. A closed load of 32
    clients queued 640 ms behind one worker counted 16 answers in its first second and 49 in each
    next. Little's law says about how many: the throughput times the response time, its median
    (answers_begin_s(), as stall() takes it: a freeze's long answers lift the mean, and would excuse
    the freeze's own dip), at most what ``within_s`` holds at that throughput."""
    return result.measured.achieved_rps * min(answers_begin_s(result), within_s)


def throughput_drift(result: LoadResult) -> float | None:
    """|first half - second half| / larger half, over the measured window's whole intervals (the
    first half with the answers its lead-in lacks, :func:`lead_in`, up to the second half's count),
    when that difference is beyond counting noise; None otherwise (or with too few intervals). A
    profile's halves are judged against their sends instead.

    Completions in a half are counts: with a and b of them, Poisson noise alone gives |a - b| a
    standard deviation of sqrt(a + b), so a difference under 3 of those is not called drift (at
    ~45 completions a half that is about 40%: slow workloads need longer runs to show drift)."""
    points = result.whole_intervals
    whole = [p.completed for p in points]
    if len(whole) < 2:
        return None
    half = len(whole) // 2
    a, b = sum(whole[:half]), sum(whole[-half:])
    if result.settings.arrival == SCHEDULE:  # a profile rises and falls by design: its answers against its sends
        sa, sb = sum(p.sent or 0 for p in points[:half]), sum(p.sent or 0 for p in points[-half:])
        if sa <= 0 or sb <= 0 or a + b <= 0:
            return None
        share = sa / (sa + sb)  # of the answers, the first half's if both kept up alike (binomial noise)
        if abs(a - (a + b) * share) <= 3 * math.sqrt((a + b) * share * (1 - share)):
            return None
        ra, rb = a / sa, b / sb
        return abs(ra - rb) / max(ra, rb)
    # never past the second half: a server that serves some connections first (Puma's starved ones)
    # answers the requests in flight at the window's start late, some after the window
    a += min(lead_in(result, half * result.settings.interval_s), max(0.0, b - a))
    if abs(a - b) <= 3 * math.sqrt(a + b):
        return None
    return abs(a - b) / max(a, b)
