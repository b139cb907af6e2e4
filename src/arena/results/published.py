"""The published figures of the five classic studies (``published.toml`` beside this file, described
in PUBLISHED.md), read into typed rows.

One owner of what a published row is: the configuration it measured (:attr:`Row.key`, which a study
file's configuration labels name), its workload and load level, and the figures Arena compares
(:data:`FIGURES`). Rows that publish nothing comparable (a chart only, a text remark) are kept, with
:attr:`Row.figures` empty, so the reproduction can say why they are not compared.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from arena.errors import ArenaError

DATA = Path(__file__).with_name("published.toml")

# the figures a reproduction compares: name -> (heading, unit); "completed" is an outcome (1 or 0)
FIGURES: dict[str, tuple[str, str]] = {
    "rps": ("req/s", ""),
    "mean_ms": ("mean", "ms"),
    "median_ms": ("p50", "ms"),
    "p90_ms": ("p90", "ms"),
    "p99_ms": ("p99", "ms"),
    "memory_mb": ("memory", "MB"),
    "completed": ("completed", ""),
}
# modes that name a different way of serving in one server (not just its process count)
DISTINCT_MODES = ("serial", "threaded", "sync", "gevent")


@dataclass(frozen=True)
class Row:
    """One published configuration at one workload and load level."""

    study: str
    index: int  # its position among the study's rows, from 0
    data: Mapping[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        return self.data.get(name, default)

    @property
    def key(self) -> str:
        """The configuration it measured, as a study file labels it: the server, the mode where it
        names a different way of serving (WEBrick serial or threaded, Thin threaded, gunicorn sync or
        gevent), then processes x threads ("Puma 3x16"), or processes alone ("Passenger 16")."""
        mode = self.get("mode")
        single_threaded = self.get("threads") is None and self.get("processes") in (None, 1)
        parts = [self.get("server", "?")]
        if mode in DISTINCT_MODES and (mode != "threaded" or single_threaded):
            parts.append(mode)
        p, t = self.get("processes"), self.get("threads")
        if p is not None and t is not None:
            parts.append(f"{p}x{t}")
        elif p is not None:
            parts.append(str(p))
        return " ".join(parts)

    @property
    def workload(self) -> str | None:
        return self.get("workload")

    @property
    def concurrency(self) -> int | None:
        """Its clients: the tool's concurrency (JMeter: its threads)."""
        return self.get("concurrency", self.get("jmeter_threads"))

    @property
    def figures(self) -> dict[str, float]:
        """The figures it publishes that Arena compares (``completed``: 1 or 0)."""
        out = {k: float(self.data[k]) for k in FIGURES if k != "completed" and isinstance(self.data.get(k), (int, float))}
        if isinstance(self.data.get("completed"), bool):
            out["completed"] = 1.0 if self.data["completed"] else 0.0
        return out

    @property
    def why_not_compared(self) -> str | None:
        """Why the row has nothing to compare (None: it has figures)."""
        if self.figures:
            return None
        return self.get("note") or "no figure published"

    @property
    def text(self) -> str:
        """The row in a few words: its table, configuration, workload and clients."""
        bits = [self.get("table"), self.key, self.workload,
                f"c={self.concurrency}" if self.concurrency is not None else None]
        return " ".join(str(b) for b in bits if b)


@dataclass(frozen=True)
class Study:
    id: str
    title: str
    source: str
    year: int | None
    conditions: Mapping[str, Any]
    rows: tuple[Row, ...]
    date: str | None = None  # YYYY-MM-DD, where the study gives its day

    @property
    def citation(self) -> str:
        return f"{self.source} ({self.year})" if self.year else self.source


def read_data(path: Path, what: str) -> dict[str, Any]:
    """One of Arena's data files (TOML, schema_version 1); an unreadable one is one line naming it
    and ``what`` it holds."""
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ArenaError(f"{path}: cannot read {what} ({e})") from None
    if raw.get("schema_version") != 1:
        raise ArenaError(f"{path}: schema_version {raw.get('schema_version')!r} is not 1, the version Arena reads")
    return raw


def load(path: Path = DATA) -> dict[str, Study]:
    """Every study of the data file, by id (an unreadable file is one line naming it)."""
    raw = read_data(path, "the published studies")
    out: dict[str, Study] = {}
    for i, s in enumerate(raw.get("study", [])):
        for key in ("id", "title", "source"):
            if not isinstance(s.get(key), str):
                raise ArenaError(f"{path}: study {i + 1}: {key} must be a string, got {s.get(key)!r}")
        rows = tuple(Row(s["id"], j, r) for j, r in enumerate(s.get("result", [])))
        out[s["id"]] = Study(s["id"], s["title"], s["source"], s.get("year"), s.get("conditions", {}), rows,
                             s.get("date"))
    return out


@lru_cache(maxsize=1)
def ids() -> tuple[str, ...]:
    """The ids of the studies in the published data, in its order."""
    return tuple(load())


def study(study_id: str, path: Path = DATA) -> Study:
    found = load(path)
    if study_id not in found:
        raise ArenaError(f"study {study_id!r}: no such study (the studies: {', '.join(found)})")
    return found[study_id]
