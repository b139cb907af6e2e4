"""``arena compare BASE NEW``: two experiments (a release against the last one) cell by cell, with the
rules that fail a build. A side is an experiment in the store, ``STORE.db:NAME``, or an ``arena export
--format json`` file kept as a baseline."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from arena import stats
from arena.app.storage import open_store
from arena.errors import ArenaError
from arena.results.aggregate import aggregate
from arena.results.comparison import Change, Rule, broken, changes, rules
from arena.results.runs import Run, decode, schema_problem


@dataclass(frozen=True)
class Compared:
    base: str
    new: str
    changes: list[Change]
    alone: list[str]  # cells only one side holds
    rules: list[Rule]
    broken: list[tuple[Rule, Change]]


def runs_of(source: str, store_path: str) -> tuple[str, list[Run]]:
    """(a name to show, the runs) of one side of a comparison."""
    if source.endswith(".json"):
        return source, _exported(source)
    path, _, name = source.rpartition(":") if ".db:" in source else (store_path, "", source)
    with open_store(path) as store:
        names = [e["name"] for e in store.experiments()]
        if name not in names:
            raise ArenaError(f"{source}: no experiment {name!r} in {path} (it has: {', '.join(names) or 'none'})")
        return source, store.runs(name)


def _exported(path: str) -> list[Run]:
    """The runs of an ``arena export --format json`` file, checked against the runs' schema first."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise ArenaError(f"{path}: cannot read it ({e.strerror})") from None
    except ValueError as e:
        raise ArenaError(f"{path}: not JSON ({e})") from None
    problem = schema_problem(doc, "export")
    if problem is not None:
        raise ArenaError(f"{path}: not the runs of `arena export --format json`: {problem}")
    return [decode(r, r) for r in doc if not r.get("failed")]


def compare(base: str, new: str, store_path: str = "arena.db", fail_on: str | None = None,
            threshold: float = stats.THRESHOLD) -> Compared:
    try:
        given = rules(fail_on) if fail_on is not None else []
    except ValueError as e:
        raise ArenaError(f"--fail-on: {e}") from None
    base_name, base_runs = runs_of(base, store_path)
    new_name, new_runs = runs_of(new, store_path)
    found, alone = changes(aggregate(base_runs), aggregate(new_runs), threshold)
    if not found:
        raise ArenaError(f"{base} and {new}: no cell in common (the same configuration, workload and load level)")
    return Compared(base_name, new_name, found, alone, given, broken(found, given))
