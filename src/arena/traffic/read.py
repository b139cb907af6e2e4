"""Access logs read from their files (gzip, bzip2 or xz compressed, or not) into requests: traffic.logs on each file's
lines, each file's format detected where it is not given; every refusal one line."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from functools import lru_cache
from dataclasses import dataclass, field
from pathlib import Path

from arena.errors import ArenaError
from arena.traffic import logs


# rotated logs as logrotate and journald's exports leave them, told by their magic bytes (not their names)
COMPRESSED = (("gzip", b"\x1f\x8b", gzip.decompress, (OSError,)),
              ("bzip2", b"BZh", bz2.decompress, (OSError, ValueError)),
              ("xz", b"\xfd7zXZ\x00", lzma.decompress, (lzma.LZMAError,)))


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
    for name, magic, decompress, errors in COMPRESSED:
        if raw.startswith(magic):
            try:
                raw = decompress(raw)
            except (*errors, EOFError) as e:
                raise ArenaError(f"{path}: a {name} file that cannot be read ({e})") from None
            break
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="replace").read().splitlines()


@dataclass
class Read:
    """What the logs gave: their requests, each file's format, the lines read (not blank), and the
    lines skipped by why: (how many, the first few as FILE:LINE), never a line's text."""

    entries: list[logs.Entry] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)
    lines: int = 0
    skips: dict[str, tuple[int, list[str]]] = field(default_factory=dict)

    @property
    def skipped(self) -> int:
        return sum(n for n, _ in self.skips.values())

    @property
    def first_skip(self) -> str | None:
        """FILE:LINE: why, of the first line skipped."""
        return next((f"{where[0]}: {why}" for why, (_, where) in self.skips.items()), None)

    def skip(self, file: str, item: logs.Skipped) -> None:
        n, where = self.skips.get(item.why, (0, []))
        self.skips[item.why] = (n + 1, where if len(where) >= SHOWN_SKIPS else [*where, f"{file}:{item.line}"])


SHOWN_SKIPS = 5  # a reason's lines named (the rest counted)


def read_logs(files: list[str], fmt: str | None, field_map: dict[str, str]) -> Read:
    """Every file's entries (formats detected where ``fmt`` is None), and what was skipped."""
    out = Read()
    for name in files:
        text = _lines(Path(name))
        kind = fmt or logs.detect(text)
        if kind is None:
            numbers = [str(n) for n, line in enumerate(text, 1) if line.strip()][:3]
            if not numbers:
                raise ArenaError(f"{name}: empty: no requests in it")
            raise ArenaError(f"{name}: not a known log format ({', '.join(logs.FORMATS)}; or give --format): "
                             f"lines {', '.join(numbers)} parse as none of them")
        out.formats[name] = kind
        for item in logs.read(text, kind, field_map):
            if isinstance(item, logs.Entry):
                out.entries.append(item)
            else:
                out.skip(name, item)
        out.lines += sum(1 for line in text if line.strip())
    if not out.entries:
        raise ArenaError(f"{', '.join(files)}: no requests read" + (f" (first line skipped: {out.first_skip})"
                                                                     if out.first_skip else ": empty"))
    return out


def arrival_times(files: list[str] | tuple[str, ...], fmt: str | None = None, fields: str | None = None,
                  flag: str | None = "--profile") -> list[float]:
    """The logs' request times in seconds (traffic.logs.arrival_times), at least two of them (a
    refusal names ``flag`` where one is given)."""
    entries = read_logs(list(files), fmt, parse_fields(fields)).entries
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
