"""What the model says of an experiment's cells, computed once, for the report to show: its
predictions against every measured point (mean-value and simulated), their errors, the calibration
per server and workload with the simulator's accept discipline, and the Universal Scalability Law
fits. Pure: cells and the model's observations in, a value out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection

from arena.model import usl
from arena.model.calibrate import Calibration
from arena.model.simulated import discipline_text
from arena.model.verify import compare, mape, p99_mape
from arena.results.aggregate import Cell, labels, workloads


@dataclass(frozen=True)
class ModelFindings:
    points: list  # verify.Point: every measured point with its predictions (simulated too)
    calibrations: dict  # (server, workload) -> Calibration, or why there is none (a string)
    disciplines: dict[tuple[str, str], str] = field(default_factory=dict)  # the simulator's, per calibration
    throughput_mape: float | None = None  # over the predicted points (the calibration level excluded)
    p99_mape_simulated: float | None = None
    p99_mape_model: float | None = None
    own_points: list = field(default_factory=list)  # calibrated per configuration (several of one server): throughput only
    own_mape: float | None = None
    usl: list[tuple[str, str, Any]] = field(default_factory=list)  # (label, workload, usl.Fit or why not)

    @property
    def with_database(self) -> bool:
        return any(isinstance(cal, Calibration) and cal.db_ms for cal in self.calibrations.values())


def findings(cells: list[Cell], observations, simulated: Collection[str] | None = None) -> ModelFindings:
    """The model's findings on ``cells``, calibrated from ``observations`` (model/observe.py): every
    cell modelled, and the cells of the configurations ``simulated`` (None: every one) simulated too
    (a simulation costs a second or two a cell: a report of 500 configurations charts a dozen)."""
    points, calibrations = compare(cells, observations, simulate_too=True, simulated_configs=simulated)
    several = len({p.label for p in points}) > len({p.server for p in points})  # configurations of one server
    own, _ = compare(cells, observations, per_configuration=True, latency=False) if several else ([], {})
    return ModelFindings(
        points, calibrations,
        {k: discipline_text(cal) for k, cal in calibrations.items() if isinstance(cal, Calibration)},
        mape(points), p99_mape(points, simulated_p99=True), p99_mape(points, simulated_p99=False),
        own, mape(own), usl_fits(cells))


def usl_fits(cells: list[Cell]) -> list[tuple[str, str, Any]]:
    """A Universal Scalability Law fit of throughput against concurrency per configuration and
    workload (closed model, valid runs, at least 4 runs at 3 levels): (label, workload, fit or why not)."""
    out = []
    for label in labels(cells):
        for w in workloads(cells):
            runs = [r for c in cells if c.label == label and c.workload == w and c.model == "closed" for r in c.valid_runs]
            if not runs:
                continue
            try:
                out.append((label, w, usl.fit([r.level for r in runs], [r.throughput for r in runs])))
            except (ValueError, ArithmeticError) as e:
                out.append((label, w, str(e)))
    return out
