"""A user's traffic from their access logs (traffic.logs reads them): ``arena mix from-log``, a
request mix file (traffic.templates groups them), and ``arena load --profile``, an open model's send
times (traffic.profile). Files are read as they are (gzip by its magic bytes); nothing is written
but the mix."""

from __future__ import annotations

import gzip
import io
import re
from dataclasses import dataclass
from pathlib import Path

from arena.atomic import writable, write_file
from arena.errors import ArenaError
from arena.mix import MAX_REQUESTS, load_mix
from arena.traffic import logs
from arena.traffic.profile import Schedule, parse_window, schedule
from arena.traffic.templates import DEFAULT_COVERAGE, Built, build, mix_toml


@dataclass(frozen=True)
class FromLog:
    built: Built
    formats: dict[str, str]  # file -> the format read
    lines: int  # lines read (not blank)
    skipped: int
    first_skip: str | None  # "FILE:LINE: why" of the first line skipped
    span_s: float | None  # from the earliest time to the latest
    output: str


def parse_fields(text: str | None) -> dict[str, str]:
    """``--fields method=verb,path=uri`` -> {field: JSON key}."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        name, eq, key = part.partition("=")
        name = name.strip()
        if name not in logs.FIELDS or not eq or not key.strip():
            raise ArenaError(f"--fields {text}: {part!r} must be FIELD=KEY with FIELD one of {', '.join(logs.FIELDS)}")
        out[name] = key.strip()
    return out


def _lines(path: Path) -> list[str]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ArenaError(f"{path}: no such log file") from None
    except OSError as e:
        raise ArenaError(f"{path}: cannot read it ({e.strerror or e})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise ArenaError(f"{path}: a gzip file that cannot be read ({e})") from None
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="replace").read().splitlines()


def _regex(flag: str, text: str | None) -> re.Pattern | None:
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as e:
        raise ArenaError(f"{flag} {text}: not a regular expression ({e})") from None


def read_logs(files: list[str], fmt: str | None,
              field_map: dict[str, str]) -> tuple[list[logs.Entry], dict[str, str], int, int, str | None]:
    """Every file's entries: (entries, file -> format, lines, lines skipped, the first skip)."""
    entries: list[logs.Entry] = []
    formats, lines, skipped, first_skip = {}, 0, 0, None
    for name in files:
        text = _lines(Path(name))
        kind = fmt or logs.detect(text)
        if kind is None:
            numbers = [str(n) for n, line in enumerate(text, 1) if line.strip()][:3]
            if not numbers:
                raise ArenaError(f"{name}: empty: no requests in it")
            raise ArenaError(f"{name}: not a known log format ({', '.join(logs.FORMATS)}; or give --format): "
                             f"lines {', '.join(numbers)} parse as none of them")
        formats[name] = kind
        for item in logs.read(text, kind, field_map):
            if isinstance(item, logs.Entry):
                entries.append(item)
            else:
                skipped += 1
                first_skip = first_skip or f"{name}:{item.line}: {item.why}"
        lines += sum(1 for line in text if line.strip())
    if not entries:
        raise ArenaError(f"{', '.join(files)}: no requests read" + (f" (first line skipped: {first_skip})"
                                                                     if first_skip else ": empty"))
    return entries, formats, lines, skipped, first_skip


def _seconds(text: str) -> float:
    from arena.plan.reader import parse_duration

    value = parse_duration(text)
    if not value:
        raise ValueError(f"{text!r} is not a duration such as 10m or 30s")
    return value


@dataclass(frozen=True)
class Profile:
    schedule: Schedule
    source: Schedule  # the same arrivals at the log's own speed (its burstiness)
    files: tuple[str, ...]
    window: str | None


def profile(files: list[str], *, fmt: str | None = None, fields: str | None = None, speed: float = 1.0,
            rate: float | None = None, window: str | None = None, seed: int = 1) -> Profile:
    """``arena load --profile``: the logs' arrivals as an open model's send times (traffic.profile),
    time-scaled by ``speed`` or to a mean ``rate``, within ``window`` (busiest:10m, first:30s)."""
    entries = read_logs(files, fmt, parse_fields(fields))[0]
    times = [t for t in logs.arrival_times(entries) if t is not None]
    if len(times) < 2:
        raise ArenaError(f"--profile {', '.join(files)}: {len(times)} of {len(entries):,} requests have a time "
                         "(vegeta targets have none): a profile needs the log's times")
    kind = length = None
    if window is not None:
        try:
            kind, length = parse_window(window, _seconds)
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
    writable(output, "-o")
    field_map = parse_fields(fields)
    if fields and fmt not in (None, "jsonl"):
        raise ArenaError(f"--fields: names a JSON line's keys; --format {fmt} has none")
    inc, exc = _regex("--include", include), _regex("--exclude", exclude)
    entries, formats, lines, skipped, first_skip = read_logs(files, fmt, field_map)
    built = build(entries, include=inc, exclude=exc, coverage=coverage, keep_values=keep_values, all_paths=all_paths)
    if len(built.kept) > MAX_REQUESTS:
        built.beyond[:0] = built.kept[MAX_REQUESTS:]
        del built.kept[MAX_REQUESTS:]
    if not built.kept:
        raise ArenaError(f"{', '.join(files)}: {built.read:,} requests read, none left to write (static assets "
                         f"{built.static:,}, health checks {built.health:,}, excluded {built.excluded:,}, "
                         f"tokens too long {built.tokens:,}, 5xx only {built.failed_only:,})")
    times = [t for t in logs.arrival_times(entries) if t is not None]
    write_file(output, mix_toml(built, ", ".join(Path(f).name for f in files)), "-o")
    load_mix(output, "-o")  # what was written reads back as a mix, or the error says why
    return FromLog(built, formats, lines, skipped, first_skip, max(times) - min(times) if len(times) > 1 else None,
                   output)
