"""A study file's ``[reproduce]`` table: which published study it reproduces, the original's
conditions the model needs to predict the published figures (its cores, each workload's CPU and
wait per request), how close a figure must be to agree, the published rows it does not run, and
those the model for the original conditions cannot reach, with why.

One owner of those keys and their checks. The published rows themselves are
arena.results.published's; a configuration measures a row when its label is the row's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from arena.results import published

KEYS = ("study", "cores", "tolerance", "workloads", "not_run", "measured_by", "beyond_model")
WORKLOAD_KEYS = ("workload", "cpu_ms", "io_ms")


@dataclass(frozen=True)
class Original:
    """One published workload: this file's workload that stands for it, and the original's work."""

    workload: str  # this file's workload name
    cpu_ms: float  # CPU per request in the original's server process (its interpreter, its app)
    io_ms: float  # waits per request that release the CPU (sleeps, calls)


@dataclass(frozen=True)
class Reproduction:
    study: str
    cores: int  # the original's CPUs (the model's prediction for the original runs on them)
    tolerance: float  # a figure agrees when within this fraction of the published one
    workloads: tuple[tuple[str, Original], ...]  # published workload name -> what stands for it here
    not_run: tuple[tuple[str, str], ...] = ()  # a row's key, workload or table -> why it is not run here
    measured_by: tuple[tuple[str, str], ...] = ()  # a row's key -> the label of the configuration that measures it
    # a published row (its text) the model for the original conditions cannot reach -> why
    beyond_model: tuple[tuple[str, str], ...] = ()

    def label(self, row_key: str) -> str:
        """The configuration that measures a published row: the one labelled with the row's key, unless
        scaling made two rows one configuration (``measured_by``)."""
        return dict(self.measured_by).get(row_key, row_key)

    def original(self, published_workload: str | None) -> Original | None:
        return dict(self.workloads).get(published_workload or "default")

    def work_of(self, workload: str) -> Original | None:
        """The original's work that this file's ``workload`` stands for (None: it stands for none)."""
        return next((o for _, o in self.workloads if o.workload == workload), None)

    def why_not_run(self, *names: str | None) -> str | None:
        """The reason a row (named by its key, workload, table) is not run here, if the file gives one."""
        skip = dict(self.not_run)
        return next((skip[n] for n in names if n in skip), None)


Fail = Callable[[str, Any, str], Exception]


def reproduction(table: Any, workload_names: set[str], fail: Fail) -> Reproduction:
    """``[reproduce]`` -> a Reproduction; ``fail(key, value, allowed)`` makes the one-line error."""
    if not isinstance(table, dict):
        raise fail("reproduce", table, "must be a table ([reproduce])")
    for key in table:
        if key not in KEYS:
            raise fail(f"reproduce.{key}", table[key], f"unknown key (allowed: {', '.join(KEYS)})")
    study = table.get("study")
    if not isinstance(study, str) or not study:
        raise fail("reproduce.study", study, "must be a study id of the published data (arena reproduce --list)")
    known = published.ids()
    if study not in known:
        raise fail("reproduce.study", study, f"unknown study (the published data has: {', '.join(known)})")
    cores = table.get("cores")
    if isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= 1024:
        raise fail("reproduce.cores", cores, "must be the original's CPU count, a whole number from 1 to 1024")
    tolerance = table.get("tolerance", 0.25)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance <= 10:
        raise fail("reproduce.tolerance", tolerance, "must be a fraction above 0 (0.25: within 25%), at most 10")
    raw = table.get("workloads", {})
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise fail("reproduce.workloads", raw, "must be tables [reproduce.workloads.<published workload>]")
    workloads = []
    for name, w in raw.items():
        where = f"reproduce.workloads.{name}"
        for key in w:
            if key not in WORKLOAD_KEYS:
                raise fail(f"{where}.{key}", w[key], f"unknown key (allowed: {', '.join(WORKLOAD_KEYS)})")
        mine = w.get("workload", "default")
        if mine not in workload_names:
            raise fail(f"{where}.workload", mine, f"must name one of this file's workloads ({', '.join(sorted(workload_names))})")
        work = []
        for key in ("cpu_ms", "io_ms"):
            v = w.get(key, 0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 600_000:
                raise fail(f"{where}.{key}", v, "must be the original's milliseconds per request, from 0 to 600000")
            work.append(float(v))
        workloads.append((name, Original(mine, *work)))
    skip = table.get("not_run", {})
    if not isinstance(skip, dict) or not all(isinstance(v, str) and v for v in skip.values()):
        raise fail("reproduce.not_run", skip, "must be a table of row key, workload or table = \"why it is not run\"")
    same = table.get("measured_by", {})
    if not isinstance(same, dict) or not all(isinstance(v, str) and v for v in same.values()):
        raise fail("reproduce.measured_by", same, "must be a table of row key = \"the label of the configuration that "
                                                  "measures it\"")
    beyond = table.get("beyond_model", {})
    if not isinstance(beyond, dict) or not all(isinstance(v, str) and v for v in beyond.values()):
        raise fail("reproduce.beyond_model", beyond, "must be a table of published row = \"why the model for the "
                                                     "original cannot reach it\"")
    rows = {r.text for r in published.study(study).rows} if beyond else set()
    for row in beyond:
        if row not in rows:
            raise fail(f"reproduce.beyond_model.{row}", beyond[row], f"names no published row of {study} "
                                                                     "(a row as arena reproduce prints it)")
    return Reproduction(study, cores, float(tolerance), tuple(workloads), tuple(skip.items()), tuple(same.items()),
                        tuple(beyond.items()))
