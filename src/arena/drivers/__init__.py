"""Load drivers: each runs a load generator and returns one LoadResult type (drivers/result.py)."""

from __future__ import annotations

from typing import Callable

from arena.drivers import ab, jmeter, native, siege, wrk
from arena.drivers.result import LoadResult, SeriesPoint

Live = Callable[[SeriesPoint], None]


def _silent(run: Callable[..., LoadResult]) -> Callable[..., LoadResult]:
    """A tool that says nothing while it runs: no live figures (its series comes with its result)."""
    return lambda spec, cpus=None, live=None: run(spec, cpus)


# name -> run(spec, cpus, live) -> LoadResult; live(point) is called during the run where the tool can
DRIVERS: dict[str, Callable[..., LoadResult]] = {"arena-load": native.run, "ab": _silent(ab.run),
                                                "wrk": _silent(wrk.run), "siege": _silent(siege.run),
                                                "jmeter": _silent(jmeter.run)}
