"""Access logs read from their files (gzipped or not) into requests: traffic.logs on each file's
lines, each file's format detected where it is not given; every refusal one line."""

from __future__ import annotations

import gzip
import io
from functools import lru_cache
from pathlib import Path

from arena.errors import ArenaError
from arena.traffic import logs


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


def arrival_times(files: list[str] | tuple[str, ...], fmt: str | None = None, fields: str | None = None,
                  flag: str | None = "--profile") -> list[float]:
    """The logs' request times in seconds (traffic.logs.arrival_times), at least two of them (a
    refusal names ``flag`` where one is given)."""
    entries = read_logs(list(files), fmt, parse_fields(fields))[0]
    times = [t for t in logs.arrival_times(entries) if t is not None]
    if len(times) < 2:
        raise ArenaError(f"{flag + ' ' if flag else ''}{', '.join(files)}: {len(times)} of {len(entries):,} requests "
                         "have a time (vegeta targets have none): a profile needs the log's times")
    return times


@lru_cache(maxsize=4)
def profile_times(files: tuple[str, ...]) -> tuple[float, ...]:
    """An experiment's profile logs' arrival times, read once: when its file is checked, and for
    every run of it."""
    return tuple(arrival_times(files, flag=None))
