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

from arena.app.storage import open_store
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
    """The shards' experiments (``only``: that one) merged into the store ``out``: each shard read
    twice, its definitions and machines first, then its runs one at a time as they are written (the
    shards' runs are never all held at once)."""
    found: dict[str, dict] = {}  # experiment -> definition, file, where first seen, its shards, machines
    for path in shards:
        if Path(path).resolve() == Path(out).resolve():
            raise ArenaError(f"{path}: is the output store (-o); merge the shards into another")
        with open_store(path, flag="") as store:  # a STORE given by position
            for e in store.experiments():
                if only is not None and e["name"] != only:
                    continue
                name, definition = e["name"], store.definition(e["name"])
                seen = found.setdefault(name, {"definition": definition, "file": store.file(name), "from": path,
                                               "shards": [], "machines": Counter()})
                if json.dumps(seen["definition"], sort_keys=True) != json.dumps(definition, sort_keys=True):
                    raise ArenaError(f"{path}: experiment {name} is not the one in {seen['from']} (another definition: "
                                     "a shard of another experiment, or of an edited file); merge it apart")
                seen["shards"].append(path)
                seen["machines"] += store.machines(name)
    if not found:
        raise ArenaError(f"{', '.join(shards)}: no experiment in these stores")
    merged = Merged(out)
    with building(out, "-o") as part, _copy_of(out, part) as target, target.one_transaction():
        for name, e in found.items():
            models = Counter()
            for (model, _), n in e["machines"].items():
                models[model] += n
            main = models.most_common(1)[0][0] if models else None

            def where(env: dict) -> str:
                return name if env.get("cpu_model") == main else f"{name}@{env.get('host') or env.get('cpu_model')}"

            apart = Counter()
            for (model, host), n in e["machines"].items():
                if model != main:
                    apart[(where({"cpu_model": model, "host": host}), model, host)] += n
            for (kept, model, host), n in apart.items():
                merged.apart.append(f"{n} run(s) of {name} ran on {host or '?'} ({model}), not {main}: kept apart as "
                                    f"experiment {kept}")
            into = _Into(target, e, merged)
            for path in e["shards"]:
                with open_store(path, flag="") as store:
                    for r in store.rows(name):
                        into.run(where(r["environment"] or {}), r)
                    into.failures(name, store.failure_rows(name))
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


class _Into:
    """The runs of one experiment written into the merged store as they come, each under the
    experiment it goes to (its name, or NAME@HOST for another CPU model): a run key met again keeps
    the later start (a shard run again replaces the attempt before it)."""

    def __init__(self, target: Store, e: dict, merged: Merged):
        self.target, self.e, self.merged = target, e, merged
        self.ids: dict[str, int] = {}
        self.started: dict[str, dict[str, float]] = {}

    def _id(self, name: str) -> int:
        if name not in self.ids:
            self.ids[name] = self.target.experiment_id(name, self.e["file"], self.e["definition"])
            self.merged.experiments.append(name)
            self.started[name] = self.target.started(self.ids[name])
        return self.ids[name]

    def run(self, name: str, r: dict) -> None:
        experiment_id, started = self._id(name), self.started[name]
        before = started.get(r["run_key"])
        if before is None:
            self.target.save_run(experiment_id, r)
            self.merged.added += 1
        elif r["started_at"] > before:  # the same run made again (a shard re-run): the later one stands
            self.target.save_run(experiment_id, r, replace=True)
            self.merged.replaced += 1
        else:
            self.merged.kept += 1
        started[r["run_key"]] = max(r["started_at"], before or r["started_at"])

    def failures(self, name: str, failures: list[dict]) -> None:
        """Runs that could not be made, with why: under the experiment's own name."""
        experiment_id = self._id(name)
        have = self.target.failed_keys(experiment_id)
        for f in failures:
            if (f["run_key"], f["failed_at"]) not in have:
                self.target.save_failure(experiment_id, f)
                have.add((f["run_key"], f["failed_at"]))
                self.merged.failures += 1
