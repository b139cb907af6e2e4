"""``arena reproduce``: the classic studies, each run from its study file (a scenario with a
``[reproduce]`` table) and set beside its published figures (reproduce/verdicts.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Callable

import arena
from arena.app.storage import open_store, results
from arena.app.run import Planned, RunCounts, run_file
from arena.errors import ArenaError
from arena.model.estimate import estimate_s
from arena.plan.expand import plan
from arena.plan.experiment import Experiment
from arena.plan.parse import load_experiment, parse_experiment
from arena.plan.stored import StoredExperiment
from arena.results import published
from arena.reproduce.verdicts import Comparison, compare
from arena.runner import Event, Seams

SCENARIOS = Path(arena.__file__).resolve().parents[2] / "scenarios"


@dataclass
class StudyFile:
    study: published.Study
    path: Path
    experiment: Experiment

    @cached_property
    def planned(self) -> Planned:
        """Its plan and the time it takes (the model estimates each run: asked for by --list only)."""
        return Planned(self.experiment, plan(self.experiment), estimate_s(self.experiment))


def study_files(directory: Path = SCENARIOS) -> dict[str, StudyFile]:
    """Every study of the published data with the study file that reproduces it (by study id, in
    the data file's order). A study without a file, or two files for one study, is an error."""
    studies = published.load()
    found: dict[str, StudyFile] = {}
    for path in sorted(directory.glob("*.toml")):
        exp = load_experiment(path)
        rep = exp.reproduce
        if rep is None:
            continue
        if rep.study not in studies:
            raise ArenaError(f"{path}: reproduce.study = {rep.study!r}: no such study (the studies: {', '.join(studies)})")
        if rep.study in found:
            raise ArenaError(f"{path}: reproduce.study = {rep.study!r}: {found[rep.study].path.name} reproduces it too")
        found[rep.study] = StudyFile(studies[rep.study], path, exp)
    missing = [s for s in studies if s not in found]
    if missing:
        raise ArenaError(f"{directory}: no study file reproduces {', '.join(missing)}")
    return {s: found[s] for s in studies}


def study_file(study_id: str, directory: Path = SCENARIOS) -> StudyFile:
    files = study_files(directory)
    if study_id not in files:
        raise ArenaError(f"study {study_id!r}: no such study (arena reproduce --list: {', '.join(files)})")
    return files[study_id]


def run_study(study_id: str, store_path: str, on_plan: Callable[[Planned], None] = lambda p: None,
              on_event: Callable[[Event], None] = lambda e: None, seams: Seams = Seams(),
              directory: Path = SCENARIOS, retake_invalid: bool = False) -> RunCounts:
    """Run the study's file into the store (what the store holds already is not run again; with
    ``retake_invalid``, a run whose stored attempts are all invalid is taken once more)."""
    sf = study_file(study_id, directory)
    counts = run_file(str(sf.path), store_path, on_plan, on_event, seams=seams, retake_invalid=retake_invalid)
    assert counts is not None
    return counts


def comparison_of(definition: StoredExperiment, cells, runs, file: str | None = None) -> Comparison | None:
    """The comparison of a stored experiment with its study (None when its definition reproduces
    none); ``file``: where its paths resolve, if not its own file. What the stored definition ran
    is what is compared; the rows the model for the original cannot reach, and why, are the study
    file's word as it is now (a store made before the file named them shows them too)."""
    if not definition.reproduces:
        return None
    exp = parse_experiment(definition.document, file or definition.named)
    rep = exp.reproduce
    assert rep is not None
    try:
        now = study_file(rep.study).experiment.reproduce
    except ArenaError:  # no study file here (an installed core without the scenarios): the stored word
        now = None
    if now is not None and now.beyond_model:
        rep = replace(rep, beyond_model=now.beyond_model)
    servers = {c.name: c.server for c in exp.servers}
    versions = {k: v for r in runs for k, v in r.environment.servers.items()}
    cpus = len(exp.server_cpus)
    return compare(published.study(rep.study), rep, cells, servers, exp.timeout_s, cpus, versions, exp.requests)


def reproduction(study_id: str, store_path: str, directory: Path = SCENARIOS) -> Comparison:
    """The study beside what its file measured into the store."""
    sf = study_file(study_id, directory)
    name = sf.experiment.name
    with open_store(store_path) as store:
        if name not in [e["name"] for e in store.experiments()]:
            raise ArenaError(f"--store {store_path}: no runs of {name} yet (arena reproduce {study_id})")
        res = results(store, name)
    comparison = comparison_of(res.definition, res.cells, res.runs, str(sf.path))
    assert comparison is not None
    return comparison
