"""The reader of an experiment file's tables: each key read (its shape already checked against the
schema, plan/schema.py), each refusal one line naming the file and the line, the key
(servers[0].threads), the value as the file writes it and what is allowed; the durations and their
bounds."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

from arena.errors import ArenaError


class KeyProblem(ArenaError):
    """A refused key of a file: ``where`` (servers[0].threads), its value and what is allowed; with
    the file's text (:meth:`at`), the line that holds the key, as compilers say it: ``file:12: ...``."""

    def __init__(self, file: str, where: str, value: Any, allowed: str, line: int | None = None):
        self.file, self.where, self.value, self.allowed, self.line = file, where, value, allowed, line
        name = where if re.fullmatch(r"[^\x00-\x1f\x7f]*", where) else show_value(where)  # a TOML key may be quoted
        super().__init__(f"{file}{'' if line is None else f':{line}'}: {name} = {show_value(value)}: {allowed}")

    def at(self, text: str) -> "KeyProblem":
        return KeyProblem(self.file, self.where, self.value, self.allowed, locate(text, keys_of(self.where)))


class Reader:
    """Typed access to one TOML table with errors that name the file and the key."""

    def __init__(self, file: str, table: dict[str, Any], prefix: str = ""):
        self.file, self.table, self.prefix = file, table, prefix

    def fail(self, key: str, value: Any, allowed: str) -> KeyProblem:
        return KeyProblem(self.file, f"{self.prefix}{key}", value, allowed)

    def unknown(self, allowed: set[str]) -> None:
        for key in self.table:
            if key not in allowed:
                raise self.fail(key, self.table[key], f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def subtable(self, key: str) -> dict[str, Any]:
        """The table under ``key`` ({} where there is none)."""
        v = self.table.get(key, {})
        if not isinstance(v, dict):
            raise self.fail(key, v, f"must be a [{key}] table")
        return v

    def get(self, key: str, default: Any = None) -> Any:
        return self.table.get(key, default)

    def string(self, key: str, default: str | None = None, choices: tuple[str, ...] | None = None) -> str | None:
        v = self.table.get(key, default)
        if v is None:
            return None
        if not isinstance(v, str) or (choices and v not in choices):
            raise self.fail(key, v, f"must be {' or '.join(map(repr, choices))}" if choices else "must be a string")
        return v

    def boolean(self, key: str, default: bool) -> bool:
        v = self.table.get(key, default)
        if not isinstance(v, bool):
            raise self.fail(key, v, "must be true or false")
        return v

    def integer(self, key: str, default: int | None, lo: int, hi: int) -> int | None:
        v = self.table.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise self.fail(key, v, f"must be a whole number from {lo} to {hi}")
        return v

    def number(self, key: str, default: float, lo: float, hi: float) -> float:
        v = self.table.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise self.fail(key, v, f"must be a number from {lo:g} to {hi:g}")
        return float(v)

    def duration(self, key: str, default: str | None, most: float) -> float | None:
        """A duration from 0 to ``most`` seconds."""
        v = self.table.get(key, default)
        if v is None:
            return None
        seconds = parse_duration(v)
        if seconds is None or seconds > most:
            raise self.fail(key, v, "must be a duration such as \"10s\", \"500ms\", \"2m\" or a number of seconds, "
                                    f"at most {human(most)}")
        return seconds

    def size_mib(self, key: str) -> float | None:
        """A memory size: "512MiB", "1.5GiB", "800M", "2G" (binary units, as cgroups and the servers'
        docs mean them) or a number of MiB; absent: None."""
        v = self.table.get(key)
        if v is None:
            return None
        mib = parse_size_mib(v)
        if mib is None or mib <= 0:
            raise self.fail(key, v, 'must be a size above 0 such as "512MiB", "2GiB", "800M" or a number of MiB')
        return mib

    def share(self, key: str) -> float | None:
        """A share: "1%", "0.5%" or a number from 0 to 1; absent: None."""
        v = self.table.get(key)
        if v is None:
            return None
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*%\s*", v) if isinstance(v, str) else None
        share = float(m.group(1)) / 100 if m else v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        if share is None or not 0 <= share <= 1:
            raise self.fail(key, v, 'must be a share such as "1%" or a number from 0 to 1')
        return float(share)

    def counts(self, key: str, lo: int, hi: int) -> list[int | None]:
        """A whole number or a list of them (a grid axis); absent: [None] (the server's default)."""
        def read(x: Any) -> int | None:
            return x if isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi else None

        return self.axis(key, read, f"must be a whole number from {lo} to {hi}")

    def axis(self, key: str, read: Callable[[Any], Any], allowed: str, none: bool = False) -> list:
        """A value or a list of them (a grid axis), each as ``read`` gives it (None: not allowed,
        ``allowed`` says what is), without repeats; with ``none``, "none" is a value too (None).
        Absent: [None]."""
        v = self.table.get(key)
        if v is None:
            return [None]
        values = v if isinstance(v, list) else [v]
        if not values:
            raise self.fail(key, v, f"{allowed}, or a list of them")
        out = []
        for i, x in enumerate(values):
            got = read(x)
            if got is None and not (none and x == "none"):
                raise self.fail(element(key, v, i), x, allowed + ("" if isinstance(v, list) else ", or a list of them"))
            out.append(got)
        return list(dict.fromkeys(out))


def element(key: str, value: Any, i: int) -> str:
    """The key that names item ``i`` of ``value`` where it is a list (``thresholds[2]``), else ``key``:
    a problem with one item shows that item, not the whole list."""
    return f"{key}[{i}]" if isinstance(value, list) else key


def human(seconds: float) -> str:
    return f"{seconds / 3600:g}h" if seconds >= 3600 else f"{seconds:g}s"


# Bounds of a run's times: a run is bounded in time; a longer one is a mistake, not a measurement.
MAX_DURATION_S = 24 * 3600.0
MAX_WARMUP_S = 3600.0
MAX_TIMEOUT_S = 3600.0


def show_value(v: Any) -> str:
    """A value as the file would write it, on one line (control characters escaped): a string quoted,
    a list or table as JSON (["a"], {"preload": true}), never a Python repr."""
    if isinstance(v, str):
        return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", v) + '"'
    if v is None:
        return "(none)"
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # TOML's own inf, -inf, nan
    return re.sub(r"[\x00-\x1f\x7f]", "?", json.dumps(v, ensure_ascii=False, default=str))


def parse_size_mib(v: Any) -> float | None:
    """"512MiB", "1.5GiB", "800M", "2G", "64KiB" or a number of MiB -> MiB (None when it is none of those)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if 0 <= v < math.inf else None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(KiB|MiB|GiB|K|M|G)\s*", v) if isinstance(v, str) else None
    return float(m.group(1)) * {"K": 1 / 1024, "M": 1.0, "G": 1024.0}[m.group(2)[0]] if m else None


def parse_duration(v: Any) -> float | None:
    """"10s", "500ms", "2m", "1h" or a number of seconds -> seconds (None when it is none of those)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if 0 <= v < math.inf else None  # NaN and infinity are not durations
    if not isinstance(v, str):
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(us|ms|s|m|h)?\s*", v)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2) or "s"]


def keys_of(where: str) -> list[str | int]:
    """``servers[0].app.rack`` -> ["servers", 0, "app", "rack"]."""
    return [int(m.group(1)) if m.group(1) else m.group(2) for m in re.finditer(r"\[(\d+)\]|([^.\[\]]+)", where)]


_HEADER = re.compile(r"""^\s*(\[\[?)\s*((?:"[^"]*"|'[^']*'|[^\]#])+?)\s*\]\]?\s*(?:#.*)?$""")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=""")


def _dotted(text: str) -> list[str]:
    return [k.strip().strip("\"'") for k in re.findall(r"""\s*(?:"[^"]*"|'[^']*'|[^.]+)""", text)]


def locate(text: str, path: list[str | int]) -> int | None:
    """The line of a TOML document that holds ``path`` (the key itself, else the nearest table or key
    above it), found from the table headers and the ``key =`` lines. tomllib keeps no positions and
    no well-kept TOML library for Python gives them; this reads only headers and keys, never values
    (a multi-line string that holds "x = " could mislead it, into a wrong line, never an error)."""
    arrays: dict[tuple, int] = {}  # an array of tables -> its elements so far
    current: tuple = ()
    best, best_len = None, 0
    for n, line in enumerate(text.splitlines(), 1):
        header, key = _HEADER.match(line), None
        if header:
            names, resolved = _dotted(header.group(2)), []
            for i, name in enumerate(names):
                resolved.append(name)
                last = i == len(names) - 1
                if last and header.group(1) == "[[":
                    arrays[tuple(resolved)] = arrays.get(tuple(resolved), 0) + 1
                if tuple(resolved) in arrays:
                    resolved.append(arrays[tuple(resolved)] - 1)
            current, full = tuple(resolved), tuple(resolved)
        elif (key := _KEY.match(line)) is not None:
            full = current + tuple(_dotted(key.group(1)))
        else:
            continue
        k = min(len(full), len(path))  # (an array of tables is where its first element is)
        if k > best_len and list(full[:k]) == path[:k]:
            best, best_len = n, k
            if k == len(path):
                return n
    return best
