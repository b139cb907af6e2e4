"""Experiments: plan and run a file into a store, read the store back as typed runs and cells,
list and export."""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from typing import Callable

from arena.errors import ArenaError
from arena.plan.experiment import Experiment, Group, estimate_s, load_experiment, plan, workloads_of
from arena.results.aggregate import Cell, aggregate
from arena.results.observe import observations
from arena.results.runs import Run
from arena.results.store import RUN_COLUMNS, Store
from arena.runner import Event, Seams, run_experiment


def open_store(path: str, must_exist: bool = True) -> Store:
    """The store at ``path``; one that does not exist is an error where it must (reading commands)."""
    if must_exist and not os.path.exists(path):
        raise ArenaError(f"--store {path}: no such store (run an experiment first: arena run scenarios/quick.toml)")
    return Store(path)


@dataclass(frozen=True)
class Planned:
    experiment: Experiment
    groups: list[Group]  # server starts, in the order they will run
    estimate_s: float


def plan_file(path: str) -> Planned:
    """Read and check an experiment file and plan it (nothing runs)."""
    exp = load_experiment(path)
    return Planned(exp, plan(exp), estimate_s(exp))


@dataclass(frozen=True)
class RunCounts:
    done: int
    skipped: int
    failed: int
    invalid: int


def run_file(exp: Experiment, store_path: str, on_event: Callable[[Event], None] = lambda e: None,
             seams: Seams = Seams()) -> RunCounts:
    """Run what of ``exp`` the store does not hold yet (resume)."""
    with open_store(store_path, must_exist=False) as store:
        counts = run_experiment(exp, store, on_event, seams)
    return RunCounts(counts["run"], counts["skipped"], counts["failed"], counts["invalid"])


@dataclass(frozen=True)
class Results:
    """One experiment as stored: its definition, its runs, and their cells."""

    name: str
    definition: dict
    runs: list[Run]
    cells: list[Cell]

    def observations(self):
        """The model's observations of the valid runs (model/calibrate.py Observation)."""
        return observations(self.runs, workloads_of(self.definition))


def results(store: Store, name: str) -> Results:
    runs = store.runs(name)
    return Results(name, store.definition(name), runs, aggregate(runs))


def latest(store: Store) -> str:
    """The name of the store's most recently run (or created) experiment."""
    found = store.experiments()
    if not found:
        raise ArenaError(f"--store {store.path}: the store has no experiment")
    return max(found, key=lambda e: e["last_run"] or e["created_at"])["name"]


def experiments(store_path: str) -> list[dict]:
    with open_store(store_path) as store:
        return store.experiments()


def export(store_path: str, name: str, fmt: str) -> str:
    """The experiment's runs as JSON (every run whole) or CSV (one flat row per run)."""
    with open_store(store_path) as store:
        runs = store.runs(name)
    if fmt == "json":
        return json.dumps([r.to_json() for r in runs], indent=1)
    flat = [c for c in RUN_COLUMNS if c not in ("load", "resources", "environment")]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["experiment", *flat])
    for r in runs:
        d = r.to_json()
        w.writerow([name, *(json.dumps(d[c]) if c == "flags" else d[c] for c in flat)])
    return buf.getvalue()
