"""A log's arrival profile -> an open model's schedule of send times. Pure.

The requests per second over time are kept, and so is the shape within each second: where the
log's times have a finer grain than the second, the arrivals are sent at those times; where it
writes whole seconds (the common log format), each second's arrivals are spread at random over it
(seeded), as independent arrivals would be. Bursts stay bursts: a second with 40 requests between
seconds with 5 is sent as such.

A schedule is time-scaled (``speed``: 10 sends ten seconds of the log in one) and windowed: the
log's whole span, its first ``DURATION``, or its busiest (the window with the most requests).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

WINDOW = re.compile(r"^(busiest|first):(.+)$")


@dataclass(frozen=True)
class Schedule:
    times: np.ndarray  # send times, seconds from the start, sorted
    source_span_s: float  # the log's span the schedule was made of
    speed: float

    @property
    def span_s(self) -> float:
        return float(self.times[-1]) if len(self.times) else 0.0

    @property
    def mean_rate(self) -> float:
        """Its sends over its span: the rate it was scaled to."""
        return len(self.times) / self.span_s if self.span_s > 0 else float(len(self.times))

    def repeated(self, until_s: float) -> np.ndarray:
        """Its send times over and over until ``until_s`` (a run longer than the profile), each
        repeat a mean gap after the last send of the one before."""
        if len(self.times) == 0 or self.span_s >= until_s:
            return self.times[self.times < until_s]
        period = self.span_s + 1 / self.mean_rate
        loops = np.concatenate([self.times + k * period for k in range(int(until_s // period) + 1)])
        return loops[loops < until_s]

    def per_second(self) -> np.ndarray:
        """Sends in each whole second of the schedule."""
        return np.bincount(self.times.astype(np.int64))

    def peak(self, q: float = 99.0) -> float:
        """The ``q``th percentile of sends per second: how bursty it is."""
        return float(np.percentile(self.per_second(), q))


def parse_window(text: str, duration) -> tuple[str, float]:
    """``busiest:10m`` or ``first:30s`` -> (kind, seconds); ``duration`` parses the length
    (plan.reader.parse_duration: None where it is none). A ValueError says what is allowed."""
    m = WINDOW.match(text)
    if m is None:
        raise ValueError("must be busiest:DURATION or first:DURATION, such as busiest:10m")
    length = duration(m.group(2))
    if not length:
        raise ValueError(f"{m.group(2)!r} is not a duration above 0, such as 10m or 30s")
    return m.group(1), length


def window(times: np.ndarray, kind: str, length_s: float) -> np.ndarray:
    """The arrivals (seconds, sorted) inside the window: the first ``length_s`` of the log, or the
    ``length_s`` with the most arrivals (the earliest such); a ValueError where the log is shorter."""
    span = float(times[-1] - times[0]) if len(times) else 0.0
    if length_s > span + 1:
        raise ValueError(f"{length_s:g}s is longer than the log's {span:g}s")
    start = float(times[0])
    if kind == "busiest":
        ends = np.searchsorted(times, times + length_s, side="left")
        start = float(times[int(np.argmax(ends - np.arange(len(times))))])
    return times[(times >= start) & (times < start + length_s)]


def schedule(times: list[float] | np.ndarray, *, speed: float = 1.0, rate: float | None = None,
             window_kind: str | None = None, window_s: float | None = None, seed: int = 1) -> Schedule:
    """The send times for a log's arrival ``times`` (seconds since the epoch, any order): spread
    within their seconds where the log writes whole seconds, windowed, then scaled by ``speed`` or
    to a mean ``rate`` (requests per second)."""
    t = np.sort(np.asarray(times, dtype=float))
    if len(t) == 0:
        raise ValueError("no arrival times")
    if np.all(t == np.floor(t)):  # whole seconds: each second's arrivals at random within it
        t = np.sort(t + np.random.default_rng(seed).random(len(t)))
    if window_kind is not None:
        t = window(t, window_kind, window_s)
    t = t - math.floor(t[0])  # its seconds where the log had them
    source_span = float(t[-1]) if len(t) else 0.0
    if rate is not None and source_span > 0:
        speed = rate * source_span / len(t)
    return Schedule(t / speed, source_span, speed)
