"""``arena mix from-log``: access logs -> a request mix file (traffic.logs reads them,
traffic.templates groups them). Files are read as they are (gzip by its magic bytes); nothing is
written but the mix."""

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


def from_log(files: list[str], output: str, *, fmt: str | None = None, fields: str | None = None,
             coverage: float = DEFAULT_COVERAGE, include: str | None = None, exclude: str | None = None,
             keep_values: bool = False, all_paths: bool = False) -> FromLog:
    writable(output, "-o")
    field_map = parse_fields(fields)
    if fields and fmt not in (None, "jsonl"):
        raise ArenaError(f"--fields: names a JSON line's keys; --format {fmt} has none")
    inc, exc = _regex("--include", include), _regex("--exclude", exclude)
    entries: list[logs.Entry] = []
    formats, lines, skipped, first_skip = {}, 0, 0, None
    first, last = [], []
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
        mine = []
        for item in logs.read(text, kind, field_map):
            if isinstance(item, logs.Entry):
                mine.append(item)
            else:
                skipped += 1
                first_skip = first_skip or f"{name}:{item.line}: {item.why}"
        lines += sum(1 for line in text if line.strip())
        if mine:
            first.append(logs.seconds(mine[0].time))
            last.append(logs.seconds(mine[-1].time))
        entries += mine
    if not entries:
        raise ArenaError(f"{', '.join(files)}: no requests read" + (f" (first line skipped: {first_skip})"
                                                                     if first_skip else ": empty"))
    built = build(entries, include=inc, exclude=exc, coverage=coverage, keep_values=keep_values, all_paths=all_paths)
    if len(built.kept) > MAX_REQUESTS:
        built.beyond[:0] = built.kept[MAX_REQUESTS:]
        del built.kept[MAX_REQUESTS:]
    if not built.kept:
        raise ArenaError(f"{', '.join(files)}: {built.read:,} requests read, none left to write (static assets "
                         f"{built.static:,}, health checks {built.health:,}, excluded {built.excluded:,}, "
                         f"tokens too long {built.tokens:,}, 5xx only {built.failed_only:,})")
    times = [t for t in first + last if t is not None]
    write_file(output, mix_toml(built, ", ".join(Path(f).name for f in files)), "-o")
    load_mix(output, "-o")  # what was written reads back as a mix, or the error says why
    return FromLog(built, formats, lines, skipped, first_skip, max(times) - min(times) if len(times) > 1 else None,
                   output)
