"""Predicted against measured: the model calibrated from each server's lowest-load runs, then
asked for every configuration and load level of the experiment. Pure (cells and observations in)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

import math

from arena import stats
from arena.model import simulated
from arena.model.simulated import Simulated
from arena.model.calibrate import Calibration, Observation, calibrate, server_config
from arena.model.server import Prediction, predict_closed, predict_open
from arena.results.aggregate import Cell


@dataclass(frozen=True)
class Point:
    label: str
    server: str
    workload: str
    processes: int
    threads: int | None
    model: str
    level: float
    measured: float  # median throughput of the valid repetitions
    predicted: Prediction
    calibration_run: bool  # a level the calibration used (not a prediction)
    measured_p99_ms: float | None = None  # median p99 of the valid repetitions
    simulated: Simulated | None = None  # the simulator's prediction (compare(simulate_too=True))
    discipline_run: bool = False  # a level the simulator's accept discipline was learned from

    @property
    def error(self) -> float:
        """Relative error of the predicted throughput (signed)."""
        return (self.predicted.throughput - self.measured) / self.measured


def predict(cal: Calibration, processes: int | None, threads: int | None, model: str, level: float,
            pool: int | None = None, latency: bool = True) -> Prediction:
    config = cal.config(processes, threads, pool)
    if model == "closed":
        return predict_closed(cal.workload_model(), config, int(level), latency=latency)
    return predict_open(cal.workload_model(), config, level, latency)


def simulate(cal: Calibration, cell: Cell, **settings) -> Simulated:
    """The simulator's prediction for a measured cell, its connections kept alive and its arrivals
    spaced as they were."""
    run = cell.runs[0]
    return simulated.predict(cal, cell.processes, cell.threads, cell.model, cell.level, cell.pool,
                             keep_alive=run.kept_alive, arrival=run.arrival, **settings)


def compare(cells: list[Cell], observations: list[Observation], per_configuration: bool = False,
            simulate_too: bool = False, learn: bool = False,
            simulated_configs: Collection[str] | None = None,
            latency: bool = True) -> tuple[list[Point], dict[tuple, Calibration | str]]:
    """Every cell with valid runs: measured and predicted (and, ``simulate_too``, simulated).
    Calibrations per (server, workload) from the lowest-load runs of all its configurations (or,
    ``per_configuration``, each configuration from its own lowest-load runs: keyed (server,
    workload, processes, threads, pool)), or why there is none. Simulating, a server's accept
    discipline is learned from its first measured level with queueing (simulated.learn) where its catalog entry
    does not give it, or everywhere with ``learn``; that level is then left out of the simulator's p99
    error (Point.discipline_run). ``simulated_configs``: the configurations (ServerConfig.key) to
    simulate, and to learn the discipline from (None: every one); the others are only modelled.
    ``latency`` False: the predictions' p50 and p99 left out (NaN), where only throughput is judged."""
    calibrations: dict[tuple, Calibration | str] = {}
    points = []
    simulating = [c for c in cells if simulated_configs is None or c.config in simulated_configs]
    own: dict[tuple, list[Observation]] = {}  # per configuration: its own observations, gathered once
    if per_configuration:
        for o in observations:
            own.setdefault((o.server, o.processes, o.threads, o.pool), []).append(o)
    lowest: dict[tuple, float] = {}  # per calibration: the level it was calibrated at
    for c in cells:
        if c.throughput.median is None:
            continue
        key: tuple = (c.server, c.workload)
        if per_configuration:
            key += (c.processes, c.threads, c.pool)
        if key not in calibrations:
            mine = own.get((c.server, *key[2:]), []) if per_configuration else observations
            lowest[key] = min((o.level for o in mine if o.server == c.server and o.workload == c.workload),
                              default=math.nan)
            try:
                calibrations[key] = calibrate(mine, c.server, c.workload)
            except ValueError as e:
                calibrations[key] = str(e)
            else:
                if simulate_too:
                    calibrations[key] = simulated.learn(calibrations[key], simulating, always=learn)
        cal = calibrations[key]
        if isinstance(cal, str):
            continue
        try:
            predicted = predict(cal, c.processes, c.threads, c.model, c.level, c.pool, latency)
        except (ValueError, ArithmeticError) as e:  # a calibration the model cannot use: say why, per server
            calibrations[key] = f"cannot predict from this calibration: {e}"
            points = [p for p in points if (p.server, p.workload) != key[:2]]
            continue
        low = lowest[key]
        config = server_config(c.server, c.processes, c.threads, cal.cores)
        learned_at = cal.discipline and cal.discipline.learned_at
        points.append(Point(c.label, c.server, c.workload, config.processes, config.threads, c.model, c.level,
                            c.throughput.median, predicted, c.level == low,
                            c.p99_us.median / 1000 if c.p99_us.median is not None else None,
                            simulate(cal, c) if simulate_too and c.front is None and (
                                simulated_configs is None or c.config in simulated_configs) else None,
                            c.model == "closed" and c.level == learned_at))
    points.sort(key=lambda pt: (pt.workload, pt.label, pt.level))
    return points, calibrations


def measured(cells: list[Cell], cal: Calibration, processes: int | None, threads: int | None,
             pool: int | None = None, figure: str = "throughput") -> dict[tuple[str, float], float]:
    """(model, level) -> median throughput (``figure`` "p99": p99 in ms) of the valid runs of
    ``cal``'s server and workload in that configuration (knobs left unset mean the server's
    defaults, on both sides)."""
    out = {}
    for c in matching(cells, cal, processes, threads, pool):
        value = c.throughput.median if figure == "throughput" else c.p99_us.median and c.p99_us.median / 1000
        if value is not None:
            out[(c.model, c.level)] = value
    return out


def matching(cells: list[Cell], cal: Calibration, processes: int | None, threads: int | None,
             pool: int | None = None) -> list[Cell]:
    """The cells of ``cal``'s server and workload in that configuration that measured a throughput
    (knobs left unset mean the server's defaults, on both sides)."""
    want = cal.config(processes, threads, pool)

    def same(c: Cell) -> bool:
        have = cal.config(c.processes, c.threads, c.pool)
        return (have.processes, have.threads, have.pool) == (want.processes, want.threads, want.pool)

    return [c for c in cells if c.server == cal.server and c.workload == cal.workload and c.throughput.median is not None
            and same(c)]


def mape(points: list[Point], predictions_only: bool = True) -> float | None:
    """Mean absolute percentage error of throughput, over the points that were predicted (not the
    calibration's own level) unless ``predictions_only`` is False."""
    return stats.mape([(p.predicted.throughput, p.measured) for p in points
                       if not (predictions_only and p.calibration_run)])


def p99_mape(points: list[Point], simulated_p99: bool) -> float | None:
    """Mean absolute percentage error of p99 over the predicted points that have a measured p99
    and a finite prediction: the simulator's (``simulated_p99``; not at the level its discipline
    was learned from) or the mean-value model's."""
    pairs = [((p.simulated.prediction if simulated_p99 else p.predicted).p99_ms, p.measured_p99_ms) for p in points
             if not p.calibration_run and p.measured_p99_ms and (p.simulated or not simulated_p99)
             and not (simulated_p99 and p.discipline_run)]
    return stats.mape([(x, m) for x, m in pairs if math.isfinite(x)])
