"""Load at a URL with arena-load: ``arena load``."""

from __future__ import annotations

import json

from arena.drivers import native
from arena.drivers.result import LoadResult
from arena.drivers.spec import LoadSpec
from arena.errors import ArenaError


def load(spec: LoadSpec, cpus: list[int] | None = None, json_path: str | None = None) -> LoadResult:
    """Drive ``spec`` with arena-load pinned to ``cpus``; with ``json_path``, also write its JSON
    result there (refused before the load when the file cannot be written)."""
    if json_path is not None:
        try:
            open(json_path, "a").close()
        except OSError as e:
            raise ArenaError(f"--json {json_path}: cannot write it ({e.strerror})") from None
    result = native.run(spec, cpus=cpus)
    if json_path is not None:
        with open(json_path, "w") as f:
            json.dump(result.raw, f, indent=1)
    return result
