"""``arena merge``: the stores of a sharded experiment (``arena run --shard i/N``, one per job) into
one store.

Each experiment is merged by name, and only where every store holds it with the same definition
(the definition fixes the plan: the same seed deals the same shares); a store whose experiment has
another definition is refused, naming both. A run is keyed by its run key (configuration, workload,
level, repetition): merged again, the same run is kept once; a shard run again replaces the run it
made before (the later start wins), never adds a second. Runs whose machines differ in CPU model
are not pooled into one cell silently: the CPU model most runs have keeps the experiment's name,
the others go to ``NAME@HOST`` with a warning. The output is written whole or not at all: the merge
is made in a copy beside it, renamed over it at the end.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from arena.app.experiments import open_store
from arena.atomic import building
from arena.errors import ArenaError
from arena.results.store import Store


@dataclass
class Merged:
    out: str
    experiments: list[str] = field(default_factory=list)  # names written
    added: int = 0  # runs new to the output
    replaced: int = 0  # runs that replaced an earlier attempt at the same run (a shard run again)
    kept: int = 0  # runs the output held already (the same run merged again, or a later attempt)
    failures: int = 0  # runs that could not be made, copied with why
    apart: list[str] = field(default_factory=list)  # warnings: runs kept apart from the experiment's cells


def merge(shards: list[str], out: str, only: str | None = None) -> Merged:
    """The shards' experiments (``only``: that one) merged into the store ``out``."""
    found: dict[str, dict] = {}  # experiment -> definition, file, where first seen, runs, failures
    for path in shards:
        if Path(path).resolve() == Path(out).resolve():
            raise ArenaError(f"{path}: is the output store (-o); merge the shards into another")
        with open_store(path, flag="") as store:  # a STORE given by position
            for e in store.experiments():
                if only is not None and e["name"] != only:
                    continue
                name, definition = e["name"], store.definition(e["name"])
                seen = found.setdefault(name, {"definition": definition, "file": store.file(name), "from": path,
                                               "runs": [], "failures": []})
                if json.dumps(seen["definition"], sort_keys=True) != json.dumps(definition, sort_keys=True):
                    raise ArenaError(f"{path}: experiment {name} is not the one in {seen['from']} (another definition: "
                                     "a shard of another experiment, or of an edited file); merge it apart")
                runs, failures = store.rows(name)
                seen["runs"] += runs
                seen["failures"] += failures
    if not found:
        raise ArenaError(f"{', '.join(shards)}: no experiment in these stores")
    merged = Merged(out)
    with building(out, "-o") as part, _copy_of(out, part) as target:
        for name, e in found.items():
            models = Counter((r["environment"] or {}).get("cpu_model") for r in e["runs"])
            main = models.most_common(1)[0][0] if models else None
            parts: dict[str, list[dict]] = {}
            for r in e["runs"]:
                env = r["environment"] or {}
                where = name if env.get("cpu_model") == main else f"{name}@{env.get('host') or env.get('cpu_model')}"
                parts.setdefault(where, []).append(r)
            for where, runs in parts.items():
                if where != name:
                    env = runs[0]["environment"] or {}
                    merged.apart.append(f"{len(runs)} run(s) of {name} ran on {env.get('host') or '?'} "
                                        f"({env.get('cpu_model')}), not {main}: kept apart as experiment {where}")
                _write(target, where, e, runs, e["failures"] if where == name else [], merged)
    return merged


@contextmanager
def _copy_of(out: str, part: Path) -> Iterator[Store]:
    """The store to merge into: a copy of ``out`` (where it holds runs already) at ``part``, renamed
    over ``out`` by the caller once the merge is whole (arena.atomic.building): a merge that is killed
    or fails halfway leaves ``out`` as it was, never a store with some of the runs."""
    if os.path.getsize(out) if os.path.isfile(out) else 0:  # an Arena store (of this schema or older), or refused
        with open_store(out, flag="-o") as source, sqlite3.connect(part) as copy:
            source.db.backup(copy)
        copy.close()
    store = Store(part, flag="-o", shown=out)
    try:
        yield store
    finally:
        store.close()


def _write(target, name: str, e: dict, runs: list[dict], failures: list[dict], merged: Merged) -> None:
    experiment_id = target.experiment_id(name, e["file"], e["definition"])
    merged.experiments.append(name)
    started = target.started(experiment_id)
    for r in sorted(runs, key=lambda r: r["started_at"]):
        before = started.get(r["run_key"])
        if before is None:
            target.save_run(experiment_id, r)
            merged.added += 1
        elif r["started_at"] > before:  # the same run made again (a shard re-run): the later one stands
            target.save_run(experiment_id, r, replace=True)
            merged.replaced += 1
        else:
            merged.kept += 1
        started[r["run_key"]] = max(r["started_at"], before or r["started_at"])
    have = target.failed_keys(experiment_id)
    for f in failures:
        if (f["run_key"], f["failed_at"]) not in have:
            target.save_failure(experiment_id, f)
            merged.failures += 1
