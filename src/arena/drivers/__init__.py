"""Load drivers: each runs a load generator and returns one LoadResult type (results/load_result.py),
and declares what it can do (drivers/spec.py Capabilities) as data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from arena.drivers import ab, jmeter, native, siege, wrk
from arena.results.load_result import LoadResult, SeriesPoint
from arena.drivers.spec import Capabilities, LoadSpec

# run(spec, cpus, live) -> LoadResult; live(point) is called during the run where the driver can
Run = Callable[..., LoadResult]


@dataclass(frozen=True)
class Driver:
    run: Run
    capabilities: Capabilities


def _silent(run: Callable[[LoadSpec, list[int] | None], LoadResult]) -> Run:
    """A tool that says nothing while it runs: no live figures (its series comes with its result)."""
    def silent(spec: LoadSpec, cpus: list[int] | None = None,
               live: Callable[[SeriesPoint], None] | None = None) -> LoadResult:
        return run(spec, cpus)

    return silent


DRIVERS: dict[str, Driver] = {
    "arena-load": Driver(native.run, native.CAPABILITIES),
    "ab": Driver(_silent(ab.run), ab.CAPABILITIES),
    "wrk": Driver(_silent(wrk.run), wrk.CAPABILITIES),
    "siege": Driver(_silent(siege.run), siege.CAPABILITIES),
    "jmeter": Driver(_silent(jmeter.run), jmeter.CAPABILITIES),
}
