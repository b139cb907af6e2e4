"""The store as the commands read it: open one, read an experiment back as typed runs and cells
(``results``), list the experiments, export them (JSON, CSV, HdrHistogram's formats) and bring in
rescued runs. Running an experiment into a store is app/run.py's."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field

from arena.errors import ArenaError
from arena.plan.stored import StoredExperiment, stored_experiment
from arena.results.aggregate import Cell, aggregate
from arena.report.formats import ExportView, render
from arena.results.runs import Failure, Run
from arena.results.store import Store, read_rescued


def open_store(path: str, write: bool = False, flag: str = "--store") -> Store:
    """The store at ``path``: to read (it must exist, and is never written, not even upgraded), or to
    ``write`` (created where missing; checked writable before anything runs). Errors name ``flag``."""
    if not write and not os.path.exists(path):
        raise ArenaError(f"{flag} {path}".lstrip() + f": no such store (looked for {os.path.abspath(path)}; run an "
                         "experiment first: arena run scenarios/quick.toml, or name the store with --store or ARENA_STORE)")
    return Store(path, readonly=not write, flag=flag)


def import_rescued(path: str, store_path: str) -> tuple[str, int, int]:
    """Bring runs kept in a rescue file (a store that could not be written) into the store at
    ``store_path``. Returns the experiment's name, the rows brought in and the runs already there."""
    doc = read_rescued(path)
    with open_store(store_path, write=True) as store:
        added, already = store.bring_in(doc)
    return doc["experiment"]["name"], added, already


@dataclass(frozen=True)
class Results:
    """One experiment as stored: its definition (decoded once), its runs, and their cells."""

    name: str
    definition: StoredExperiment
    runs: list[Run]
    cells: list[Cell]
    failures: list[Failure] = field(default_factory=list)  # runs whose last attempt could not be made
    steps: list[tuple[str, str]] = field(default_factory=list)  # the latest search's steps: (stage, text)

    def observations(self, leave_out: Collection[tuple[str, str, str]] = frozenset()):
        """The model's observations of the valid runs (model/calibrate.py Observation), but those of
        the cells ``leave_out`` names (label, workload, level: a pathology the model does not know)."""
        from arena.model.observe import observations  # here: reading a store needs no model (nor numpy)

        runs = [r for r in self.runs if (r.label, r.workload, r.level_label) not in leave_out] if leave_out else self.runs
        return observations(runs, self.definition.workloads)


def results(store: Store, name: str) -> Results:
    runs = store.runs(name)
    return Results(name, stored_experiment(name, store.file(name), store.definition(name)), runs, aggregate(runs),
                   store.failures(name), store.steps(name))


def latest(store: Store) -> str:
    """The name of the store's most recently run (or created) experiment."""
    found = store.experiments()
    if not found:
        raise ArenaError(f"--store {store.path}: the store has no experiment")
    return max(found, key=lambda e: e["last_run"] or e["created_at"])["name"]


def experiments(store_path: str) -> list[dict]:
    with open_store(store_path) as store:
        return store.experiments()


def export_files(store_path: str, name: str, fmt: str, per: str = "run") -> dict[str, str]:
    """The experiment's runs in the export format ``fmt`` (report/formats/: csv, json, hlog, hgrm):
    file name -> text (one file, or one per cell); ``per``: hlog's interval, "run" or "second"."""
    def read(detail: str) -> tuple[list[Run], list[Failure]]:
        with open_store(store_path) as store:
            return store.runs(name, detail), store.failures(name)

    return render("export", fmt, ExportView(name, read, per))


def export(store_path: str, name: str, fmt: str, per: str = "run") -> str:
    """The one file of a format that writes one (csv, json, hlog), as text."""
    (text,) = export_files(store_path, name, fmt, per).values()
    return text
