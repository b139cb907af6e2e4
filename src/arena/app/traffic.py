"""A user's traffic from their access logs (traffic.logs reads them): ``arena mix from-log``, a
request mix file (traffic.templates groups them), and ``arena load --profile``, an open model's send
times (traffic.profile). Files are read as they are (gzip by its magic bytes); nothing is written
but the mix."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from arena.atomic import writable, write_file
from arena.errors import ArenaError
from arena.mix import MAX_REQUESTS, parse_mix
from arena.plan.reader import parse_duration
from arena.results.run_setup import SCHEDULE
from arena.traffic import logs
from arena.traffic.read import Read, arrival_times, parse_fields, read_logs
from arena.traffic.profile import Schedule, parse_window, schedule
from arena.traffic.templates import DEFAULT_COVERAGE, Built, build, mix_toml


@dataclass(frozen=True)
class FromLog:
    built: Built
    read: Read  # the logs' formats, lines, and the lines skipped by why
    span_s: float | None  # from the earliest time to the latest
    output: str


def _regex(flag: str, text: str | None) -> re.Pattern | None:
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as e:
        raise ArenaError(f"{flag} {text}: not a regular expression ({e})") from None


@dataclass(frozen=True)
class Profile:
    schedule: Schedule
    source: Schedule  # the same arrivals at the log's own speed (its burstiness)
    files: tuple[str, ...]
    window: str | None

    def load(self, duration_s: float | None, warmup_s: float) -> dict:
        """The LoadSpec fields that send it: its times, its mean rate, and a duration that ends with
        its last send where none is given (the warm-up is its first seconds)."""
        s = self.schedule
        return dict(rate=s.mean_rate, arrival=SCHEDULE, schedule=s.times.tolist(),
                    duration_s=duration_s or max(0.001, s.span_s + 0.001 - warmup_s))


def profile(files: list[str], *, fmt: str | None = None, fields: str | None = None, speed: float = 1.0,
            rate: float | None = None, window: str | None = None, seed: int = 1) -> Profile:
    """``arena load --profile``: the logs' arrivals as an open model's send times (traffic.profile),
    time-scaled by ``speed`` or to a mean ``rate``, within ``window`` (busiest:10m, first:30s)."""
    times = arrival_times(files, fmt, fields)
    kind = length = None
    if window is not None:
        try:
            kind, length = parse_window(window, parse_duration)
        except ValueError as e:
            raise ArenaError(f"--window {window}: {e}") from None
    try:
        own = schedule(times, window_kind=kind, window_s=length, seed=seed)
    except ValueError as e:
        raise ArenaError(f"--window {window}: {e}") from None
    scaled = schedule(times, speed=speed, rate=rate, window_kind=kind, window_s=length, seed=seed)
    return Profile(scaled, own, tuple(files), window)


def from_log(files: list[str], output: str, *, fmt: str | None = None, fields: str | None = None,
             coverage: float = DEFAULT_COVERAGE, include: str | None = None, exclude: str | None = None,
             keep_values: bool = False, all_paths: bool = False) -> FromLog:
    """The logs' request mix, written to ``output`` only once it is whole and reads back as a mix:
    a refusal leaves an existing ``output`` as it was, and ``output`` is never one of the logs."""
    writable(output, "-o")
    for f in files:
        if _same_file(f, output):
            raise ArenaError(f"-o {output}: is the log {f} (the mix would overwrite what it is made of)")
    field_map = parse_fields(fields)
    inc, exc = _regex("--include", include), _regex("--exclude", exclude)
    read = read_logs(files, fmt, field_map)
    # --fields names a JSON line's keys: refused with any other format, given or detected
    if fields and (other := next((f for f, kind in read.formats.items() if kind != "jsonl"), None)):
        raise ArenaError(f"--fields {fields}: names a JSON line's keys; {other} is a {read.formats[other]} log")
    built = build(read.entries, include=inc, exclude=exc, coverage=coverage, keep_values=keep_values,
                  all_paths=all_paths)
    if len(built.kept) > MAX_REQUESTS:
        built.beyond[:0] = built.kept[MAX_REQUESTS:]
        del built.kept[MAX_REQUESTS:]
    if not built.kept:
        raise ArenaError(f"{', '.join(files)}: {built.read:,} requests read, none left to write (static assets "
                         f"{built.static:,}, health checks {built.health:,}, excluded {built.excluded:,}, "
                         f"tokens too long {built.tokens:,}, 5xx only {built.failed_only:,})")
    times = [t for t in logs.arrival_times(read.entries) if t is not None]
    text = mix_toml(built, ", ".join(Path(f).name for f in files))
    parse_mix(tomllib.loads(text), output)  # checked whole before it is written: never a mix that will not read
    write_file(output, text, "-o")
    return FromLog(built, read, max(times) - min(times) if len(times) > 1 else None, output)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there (the output, before it is first written)
        return False
