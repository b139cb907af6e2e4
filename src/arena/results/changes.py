"""Documented changes in the servers between the version a published study ran and the one here
(``changes.toml`` beside this file, each change with its source), and which of them touch a
published row. The model cannot try a server's version as a cause; a reproduction names these
beside a difference that nothing it tried explains.

The version there is the one the study states for the server (its row's ``server_version``, or its
conditions' ``<server>_version``: "2.x" is any 2.y); where it states none, the study's date stands
for it: a change released after it lies between, one released in the study's own year (where only
the year is known) perhaps does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from arena.errors import ArenaError
from arena.results.published import Row, Study, read_data

DATA = Path(__file__).with_name("changes.toml")
WHEN = ("any", "clients > threads", "processes > 1")
_VERSION = re.compile(r"\d+(?:\.(?:\d+|x))*")


@dataclass(frozen=True)
class Change:
    server: str  # a catalog name, or its family (its first part: "gunicorn" for all gunicorn's workers)
    version: str
    released: str  # YYYY-MM-DD, or YYYY where the source gives no day
    change: str  # in the source's words
    touches: str  # what it may touch in a benchmark
    when: str  # one of WHEN
    source: str


@dataclass(frozen=True)
class Searched:
    """Sources read for a server where they name no change of this kind."""

    server: str
    source: str
    found: str


@dataclass(frozen=True)
class Between:
    """A change between there and here that touches a row; ``perhaps``: released in the study's own
    year, which is all the study says of its date."""

    change: Change
    perhaps: bool = False


def family(server: str) -> str:
    """A catalog server's family, as the table names it: "gunicorn" for gunicorn-gevent."""
    return server.split("-")[0]


def version_key(text: str | None) -> tuple[float, ...] | None:
    """A version as numbers to compare ("2.x" is above every 2.y); None where the text has none."""
    found = _VERSION.search(text or "")
    if not found:
        return None
    return tuple(math.inf if p == "x" else float(p) for p in found.group().split("."))


@lru_cache(maxsize=1)
def load(path: Path = DATA) -> tuple[tuple[Change, ...], tuple[Searched, ...]]:
    """The table (an unreadable or malformed one is one line naming it and what is wrong)."""
    raw = read_data(path, "the servers' documented changes")

    def entries(kind: str, cls: type) -> tuple:
        out = []
        for i, entry in enumerate(raw.get(kind, [])):
            missing = [k for k in cls.__dataclass_fields__ if not isinstance(entry.get(k), str)]
            if missing:
                raise ArenaError(f"{path}: {kind} {i + 1}: {missing[0]} must be a string, got {entry.get(missing[0])!r}")
            out.append(cls(**{k: entry[k] for k in cls.__dataclass_fields__}))
        return tuple(out)

    changes, searched = entries("change", Change), entries("searched", Searched)
    for i, c in enumerate(changes):
        if c.when not in WHEN:
            raise ArenaError(f"{path}: change {i + 1}: when must be one of {', '.join(WHEN)}, got {c.when!r}")
        if version_key(c.version) is None or not re.fullmatch(r"\d{4}(-\d\d-\d\d)?", c.released):
            raise ArenaError(f"{path}: change {i + 1}: version {c.version!r} or released {c.released!r} "
                             "is not a version and a date (YYYY-MM-DD or YYYY)")
    return changes, searched


def stated_version(study: Study, row: Row, server: str) -> str | None:
    """The version of ``server`` (a family) the study states for the row, as it states it."""
    stated = row.get("server_version") or study.conditions.get("software", {}).get(f"{server}_version")
    return None if stated is None or version_key(str(stated)) is None else str(stated)


def _applies(when: str, row: Row) -> bool:
    p, t, c = row.get("processes"), row.get("threads"), row.concurrency
    if when == "processes > 1":
        return p is None or p > 1
    if when == "clients > threads":
        return c is None or c > (p or 1) * (t or 1)
    return True


def between(study: Study, row: Row, server: str, here: str | None,
            changes: tuple[Change, ...] | None = None) -> list[Between]:
    """The documented changes of ``server`` (a catalog name) after the version the row ran and up to
    ``here`` (the version here; None: every later one) that apply to the row, oldest first."""
    name = family(server)
    changes = load()[0] if changes is None else changes
    there = version_key(stated_version(study, row, name))
    here_key = version_key(here)
    date = study.date or (str(study.year) if study.year else None)
    out = []
    for c in changes:
        key = version_key(c.version)
        if c.server not in (server, name) or not _applies(c.when, row) or (here_key is not None and key > here_key):
            continue
        if there is not None:  # as precise as the study states it: "3" is any 3.y
            if key[:len(there)] > there:
                out.append(Between(c))
        elif date is not None:
            after = _after(c.released, date)
            if after is not False:
                out.append(Between(c, perhaps=after is None))
    return sorted(out, key=lambda b: version_key(b.change.version))


def _after(released: str, date: str) -> bool | None:
    """Whether a release came after the study's date; None where the dates cannot tell (the same
    year where one of them gives only the year, or the same day)."""
    n = min(len(released), len(date))
    return None if released[:n] == date[:n] else released[:n] > date[:n]
