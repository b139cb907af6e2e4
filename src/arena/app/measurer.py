"""The search's measurer through the store: the runs a search asks for made by the runner into the
store and read back as samples (a run that could not be made counts, invalid), each step of the
search stored in order (the report's tuning path). arena tune's (app/tune.py) and arena run's
capacity search's (app/find.py)."""

from __future__ import annotations

import time
from typing import Callable, Sequence

from arena.app.storage import open_store
from arena.model.capacity import Ask, Key, Sample, sample_of
from arena.plan.experiment import Experiment, Group, Level, RunSpec, ServerConfig, Workload
from arena.results.runs import Failure, Run
from arena.runner import Event, RunCounts, Seams, run_experiment


class Stored:
    """The search's measurer: runs made by the runner into the store, read back as samples. A
    contender is a configuration of the experiment serving one of its workloads (``points``)."""

    def __init__(self, exp: Experiment, store_path: str, seams: Seams, on_event: Callable[[Event], None],
                 points: dict[Key, tuple[ServerConfig, Workload]], on_step: Callable[[str], None] = lambda s: None):
        self.exp, self.store_path, self.seams, self.on_event, self.points = exp, store_path, seams, on_event, points
        self.on_step = on_step
        self.counts = RunCounts()
        self.session, self.seq = time.time(), 0  # this invocation's steps (Store.save_step)
        with open_store(store_path, write=True) as store:
            self.experiment_id = store.experiment_id(exp.name, exp.file, exp.source)
        self._load()

    def measure(self, asks: Sequence[Ask]) -> None:
        groups = []
        for a in asks:
            config, workload = self.points[a.key]
            groups.append(Group(config, a.repetition, (RunSpec(config, a.level, a.repetition, workload, why=a.why),)))
        with open_store(self.store_path, write=True) as store:
            self.counts += run_experiment(self.exp, store, self.on_event, self.seams, chosen=groups)
        self._load()

    def say(self, stage: str, text: str) -> None:
        """One step of the search: stored in order (the report's tuning path), and told."""
        self.seq += 1
        with open_store(self.store_path, write=True) as store:
            store.save_step(self.experiment_id, self.session, self.seq, stage, text)
        self.on_step(text)

    def samples(self, key: Key, level: Level) -> list[Sample]:
        config, workload = self.points[key]
        return self._by.get((config.key, workload.name, level.model, level.value), [])

    def runs(self) -> list[Run]:
        return self._runs

    def _load(self) -> None:
        """The experiment's runs and failures as stored (no cells: the search judges runs)."""
        with open_store(self.store_path) as store:
            self._runs, failures = store.runs(self.exp.name), store.failures(self.exp.name)
        by: dict[tuple, list[tuple[int, Sample]]] = {}
        for r in self._runs:
            by.setdefault(r.cell, []).append((r.repetition, sample_of(r)))
        for f in failures:  # a run that could not be made takes its repetition, invalid
            by.setdefault(f.cell, []).append((f.repetition, failed_sample(f)))
        self._by = {k: [s for _, s in sorted(v, key=lambda x: x[0])] for k, v in by.items()}


def failed_sample(f: Failure) -> Sample:
    return Sample(False, None, None, None, None, (f"{f.stage}: {f.reason}",))
