"""An experiment as a store keeps it: its definition (the file as parsed, JSON) decoded once into a
typed StoredExperiment, by a tolerant reader. Reading results needs what the definition says of the
answer (the goal, the thresholds, the workloads, how the runs were timed), never its machine-bound
parts (the CPU layout, the servers' installs): a definition this Arena cannot read whole, an older
store's or one whose app has moved, still gives every part it can, and none of the rest (no goal's
limits, no thresholds, no workloads), never an error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from arena.errors import ArenaError
from arena.plan.experiment import Workload
from arena.plan.parse import UNNAMED, VALIDITY_DEFAULTS, goal_of, thresholds_of, workloads_of
from arena.results.answer import Goal
from arena.results.thresholds import Threshold


@dataclass(frozen=True)
class StoredExperiment:
    """An experiment's stored definition, decoded: ``document`` is the definition itself (a
    verification experiment copies it; the report lists it), every other field is read from it."""

    name: str
    file: str  # the experiment file it was run from, resolved ("" or a command's name where none)
    document: dict[str, Any] = field(repr=False)
    description: str = ""
    goal: Goal = Goal()
    thresholds: tuple[Threshold, ...] = ()
    workloads: dict[str, Workload] = field(default_factory=dict)
    keep_alive: bool = True
    duration: str | None = None  # as written ("3s"); None where the runs were bounded by a request count
    requests: int | None = None
    warmup: str | None = None
    repetitions: int = 1
    find: str | None = None  # "capacity": a capacity search ([load] find)
    validity: dict[str, float] = field(default_factory=dict)  # the validity rules' thresholds (VALIDITY_DEFAULTS)
    reproduces: bool = False  # it reproduces a study ([reproduce])

    @property
    def named(self) -> str:
        """How errors name it: its file, or "(stored definition)"."""
        return self.file or UNNAMED


def stored_experiment(name: str, file: str, document: dict[str, Any]) -> StoredExperiment:
    """``document`` (an experiment's stored definition) decoded: each part read as the experiment
    reader reads it, or left at its default where this Arena cannot read it."""
    named = file or UNNAMED
    load = document.get("load") if isinstance(document.get("load"), dict) else {}
    return StoredExperiment(
        name, file, document, description=str(document.get("description") or ""),
        goal=_tolerant(lambda: goal_of(document, named), Goal()),
        thresholds=tuple(_tolerant(lambda: thresholds_of(document, named), [])),
        workloads=_tolerant(lambda: workloads_of(document, named), {}),
        keep_alive=document.get("keep_alive", True) is not False,
        duration=document.get("duration"), requests=document.get("requests"), warmup=document.get("warmup"),
        repetitions=document.get("repetitions", 1), find=load.get("find"),
        validity={k: document.get(k, v) for k, v in VALIDITY_DEFAULTS.items()},
        reproduces="reproduce" in document)


def _tolerant(read, default):
    try:
        return read()
    except ArenaError:
        return default
