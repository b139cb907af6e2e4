"""Predicted against measured: the model calibrated from each server's lowest-load runs, then
asked for every configuration and load level of the experiment. Pure (stored runs in)."""

from __future__ import annotations

from dataclasses import dataclass

from arena import stats
from arena.model.calibrate import Calibration, calibrate, server_config
from arena.model.server import Prediction, predict_closed, predict_open
from arena.store import StoredRun


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

    @property
    def error(self) -> float:
        """Relative error of the predicted throughput (signed)."""
        return (self.predicted.throughput - self.measured) / self.measured


def predict(cal: Calibration, processes: int | None, threads: int | None, model: str, level: float) -> Prediction:
    config = server_config(cal.server, processes, threads, cal.cores)
    if model == "closed":
        return predict_closed(cal.workload_model(), config, int(level))
    return predict_open(cal.workload_model(), config, level)


def compare(runs: list[StoredRun]) -> tuple[list[Point], dict[tuple[str, str], Calibration | str]]:
    """Every (configuration, level) with valid runs: measured and predicted. Calibrations per
    (server, workload), or why there is none."""
    calibrations: dict[tuple[str, str], Calibration | str] = {}
    lows: dict[tuple[str, str], float] = {}  # the calibration's level per (server, workload)
    points = []
    groups: dict[tuple, list[StoredRun]] = {}
    for r in runs:
        if r.valid:
            groups.setdefault((r.label, r.server, r.workload, r.processes, r.threads, r.model, r.level), []).append(r)
    for (label, server, workload, p, t, model, level), rs in groups.items():
        key = (server, workload)
        if key not in calibrations:
            try:
                calibrations[key] = calibrate(runs, server, workload)
            except ValueError as e:
                calibrations[key] = str(e)
            lows[key] = min(r.level for r in runs if r.server == server and r.workload == workload and r.valid)
        cal = calibrations[key]
        if isinstance(cal, str):
            continue
        config = server_config(server, p, t, cal.cores)
        points.append(Point(label, server, workload, config.processes, config.threads, model, level,
                            stats.median([r.throughput for r in rs]), predict(cal, p, t, model, level),
                            level == lows[key]))
    points.sort(key=lambda pt: (pt.workload, pt.label, pt.level))
    return points, calibrations


def measured(runs: list[StoredRun], cal: Calibration, processes: int | None,
             threads: int | None) -> dict[tuple[str, float], float]:
    """(model, level) -> median throughput of the valid runs of ``cal``'s server and workload in that
    configuration (knobs left unset mean the server's defaults, on both sides)."""
    want = server_config(cal.server, processes, threads, cal.cores)
    by_level: dict[tuple[str, float], list[float]] = {}
    for r in runs:
        if r.valid and r.server == cal.server and r.workload == cal.workload:
            c = server_config(r.server, r.processes, r.threads, cal.cores)
            if (c.processes, c.threads) == (want.processes, want.threads):
                by_level.setdefault((r.model, r.level), []).append(r.throughput)
    return {k: stats.median(v) for k, v in by_level.items()}


def mape(points: list[Point], predictions_only: bool = True) -> float | None:
    """Mean absolute percentage error of throughput, over the points that were predicted (not the
    calibration's own level) unless ``predictions_only`` is False."""
    errs = [abs(p.error) for p in points if not (predictions_only and p.calibration_run)]
    return 100 * sum(errs) / len(errs) if errs else None
