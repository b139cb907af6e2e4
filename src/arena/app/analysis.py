"""The analysis of an experiment, computed once: its goal (the file's ``[goal]`` with the command's
goal flags over it), the answer for each workload (results/answer.py: the best, the group tied with it,
every comparison, the Pareto front), the known pathologies found in its cells (results/why) and, asked, what the model says of it (model/findings.py:
calibrations, predictions against the measurements, USL fits with their intervals) and, for a
capacity search, each configuration's capacity (model/search.py capacities). ``arena show``
(text and JSON), ``arena recommend`` and the report all render it; none of them ranks, compares or
fits on its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Collection

from arena.app.storage import Results, open_store, results
from arena.errors import ArenaError
from arena.model.capacity import Capacity, capacities
from arena.results.answer import Answer, Goal, answers
from arena.results.soak import Soak, soak_of
from arena.results.streams import Held, held
from arena.results.thresholds import Outcome, evaluate, failed
from arena.results.why.diagnose import diagnose
from arena.results.why.finding import Why

if TYPE_CHECKING:
    from arena.model.findings import ModelFindings


@dataclass(frozen=True)
class GoalFlags:
    """The goal given on the command line (--p99-max, --memory-max, --error-max; None: the
    experiment's own, if any)."""

    p99_ms: float | None = None
    memory_mib: float | None = None
    error_pct: float | None = None


@dataclass(frozen=True)
class Analysis:
    results: Results
    goal: Goal
    answers: list[Answer]
    thresholds: list[Outcome]  # every threshold of the experiment on every cell it applies to
    # a capacity search's experiment ([load] find = "capacity", arena tune): each configuration's
    # capacity within the goal, from its runs at open rates: (label, workload, model.search.Capacity)
    capacities: list[tuple[str, str, Capacity]] = field(default_factory=list)
    soaks: list[Soak] = field(default_factory=list)  # a soak's runs ([load] soak): each worker's memory growth
    why: Why = Why()  # the known pathologies found in its cells (results/why)
    streams: list[Held] = field(default_factory=list)  # where it measured streams: the most each configuration held

    @property
    def failed_thresholds(self) -> list[Outcome]:
        return failed(self.thresholds)

    @property
    def without_capacity(self) -> list[str]:
        """The configurations of a capacity search that kept no rate within the goal (a failed answer)."""
        return [label for label, _, cap in self.capacities if cap.lo is None]

    def findings(self, simulated: Collection[str] | None = None) -> ModelFindings:
        """What the model says of the experiment (the report's), the configurations ``simulated`` (None:
        every one) simulated too."""
        from arena.model.findings import findings  # here: the model (and numpy) only where it is asked

        return findings(self.results.cells, self.results.observations(self.why.unmodelled()), simulated)

    def answer(self, workload: str) -> Answer:
        found = next((a for a in self.answers if a.workload == workload), None)
        if found is None:
            raise ArenaError(f"--workload {workload}: not a workload of {self.results.name} "
                             f"(it has: {', '.join(a.workload for a in self.answers)})")
        return found


def goal(res: Results, flags: GoalFlags = GoalFlags()) -> Goal:
    """The experiment's goal (none where this Arena cannot read it: the flags' alone) with what the
    command's goal flags give over it."""
    return res.definition.goal.over(p99_ms=flags.p99_ms, memory_mib=flags.memory_mib, error_pct=flags.error_pct)


def analyse(res: Results, flags: GoalFlags = GoalFlags()) -> Analysis:
    g = goal(res, flags)
    found = []
    if res.definition.find == "capacity":
        label = {r.config: r.label for r in res.runs}
        found = [(label[config], workload, cap) for (config, workload), cap in capacities(res.runs, g).items()]
    soaks = [s for s in map(soak_of, res.runs) if s is not None]  # an invalid one too: an OOM kill ends a soak
    return Analysis(res, g, answers(res.cells, g, res.failures), evaluate(res.cells, res.definition.thresholds), found,
                    soaks, diagnose(res.cells), held(res.cells, g))


def analyses(store_path: str, name: str | None = None, flags: GoalFlags = GoalFlags()) -> list[Analysis]:
    """The analysis of experiment ``name`` (default: every experiment in the store)."""
    with open_store(store_path) as store:
        names = [name] if name else [e["name"] for e in store.experiments()]
        if not names:
            raise ArenaError(f"--store {store_path}: the store has no experiment")
        found = [results(store, n) for n in names]
    return [analyse(res, flags) for res in found]
