"""Load drivers: each runs a load generator and returns one LoadResult type (drivers/result.py)."""

from __future__ import annotations

from typing import Callable

from arena.drivers import ab, native, siege, wrk
from arena.drivers.result import LoadResult

# name -> run(spec, cpus) -> LoadResult
DRIVERS: dict[str, Callable[..., LoadResult]] = {"arena-load": native.run, "ab": ab.run, "wrk": wrk.run,
                                                "siege": siege.run}
