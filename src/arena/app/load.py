"""Load at a URL with arena-load: ``arena load``."""

from __future__ import annotations

import json
from dataclasses import dataclass

from arena.drivers import native
from arena.drivers.result import LoadResult
from arena.drivers.spec import LoadSpec
from arena.errors import ArenaError


@dataclass(frozen=True)
class Loaded:
    result: LoadResult
    flags: list[str]  # why the run cannot be trusted (the rules of an experiment's runs)


ERROR_THRESHOLD = 0.01  # as an experiment's default
DRIFT_THRESHOLD = 0.25


def load(spec: LoadSpec, cpus: list[int] | None = None, json_path: str | None = None) -> Loaded:
    """Drive ``spec`` with arena-load pinned to ``cpus`` and judge the run as an experiment's runs
    are judged; with ``json_path``, also write its JSON result there (refused before the load when
    the file cannot be written)."""
    from arena.runner import validity_flags

    if json_path is not None:
        try:
            open(json_path, "a").close()
        except OSError as e:
            raise ArenaError(f"--json {json_path}: cannot write it ({e.strerror})") from None
    result = native.run(spec, cpus=cpus)
    if json_path is not None:
        with open(json_path, "w") as f:
            json.dump(result.raw, f, indent=1)
    flags = validity_flags(result, error_threshold=ERROR_THRESHOLD, drift_threshold=DRIFT_THRESHOLD,
                           server_died=False, processes_lost=None)
    return Loaded(result, flags)
