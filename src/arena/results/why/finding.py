"""A finding, and a detector's "not checked": the values the detectors return (why/__init__.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Evidence:
    what: str
    value: float
    unit: str

    @property
    def text(self) -> str:
        return f"{self.what} {self.value:.3g}{'' if self.unit in ('', '%') else ' '}{self.unit}".rstrip()


@dataclass(frozen=True)
class Finding:
    """One pathology found in one cell (a configuration at a load level)."""

    key: str  # the detector's: "nagle", "throttling", "oom"
    name: str
    label: str  # the configuration
    workload: str
    level: str
    evidence: tuple[Evidence, ...]
    effect_p50_ms: float | None  # what it added at the median and at p99 (None: not told)
    effect_p99_ms: float | None
    throughput_lost: float | None  # requests a second it cost (None: not told)
    confidence: str  # "confirmed: ..." (a direct reading says so) or "likely: ..." (the timing alone)
    reference: str
    fix: str

    @property
    def effect(self) -> str:
        parts = []
        if self.effect_p50_ms is not None:
            parts.append(f"about {self.effect_p50_ms:.3g} ms at p50")
        if self.effect_p99_ms is not None:
            parts.append(f"{self.effect_p99_ms:.3g} ms at p99")
        if self.throughput_lost:
            parts.append(f"{self.throughput_lost:.3g} req/s lost")
        return "adds " + ", ".join(parts) if parts else "its cost is not told apart"

    @property
    def line(self) -> str:
        """One line: "uvicorn p=2 at c=1: Nagle's algorithm x delayed ACK (...): adds about 44 ms at p50 ...;
        confirmed: ... Avoid it: ... (reference)"."""
        evidence = "; ".join(e.text for e in self.evidence)
        return (f"{self.label} at {self.level}: {self.name} ({evidence}): {self.effect}; {self.confidence}. "
                f"Avoid it: {self.fix} ({self.reference})")

    def without(self, measured_p99_ms: float | None) -> float | None:
        """The p99 measured with the time this pathology added at p99 taken out (None: it adds no
        told time, or as much as was measured): what a model that does not know it should meet."""
        if self.effect_p99_ms is None or measured_p99_ms is None or measured_p99_ms <= self.effect_p99_ms:
            return None
        return measured_p99_ms - self.effect_p99_ms

    def explains(self, predicted_p99_ms: float, measured_p99_ms: float | None) -> str | None:
        """One line: the model's p99 error as measured and with this pathology's time taken out."""
        without = self.without(measured_p99_ms)
        if without is None:
            return None
        pred, meas = predicted_p99_ms, measured_p99_ms
        return (f"{self.label} at {self.level}: the model's p99 {pred:.1f} ms against {meas:.1f} ms measured "
                f"({100 * (pred - meas) / meas:+.0f}%); {self.effect_p99_ms:.1f} ms of it is {self.name}: without it, "
                f"{without:.1f} ms ({100 * (pred - without) / without:+.0f}%).")

    def json(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "label": self.label, "workload": self.workload, "level": self.level,
                "evidence": [{"what": e.what, "value": e.value, "unit": e.unit} for e in self.evidence],
                "effect_p50_ms": self.effect_p50_ms, "effect_p99_ms": self.effect_p99_ms,
                "throughput_lost": self.throughput_lost, "confidence": self.confidence, "reference": self.reference,
                "fix": self.fix}


def counting(cell: Any, figure: str, least: float) -> tuple[list, float]:
    """The runs of ``cell`` (valid or not) whose resources count ``figure`` (a ResourceResult field: OOM
    kills, listen overflows, workers replaced) at least ``least`` times, and their sum."""
    hit = [r for r in cell.runs if r.resources and (getattr(r.resources, figure) or 0) >= least]
    return hit, sum(getattr(r.resources, figure) for r in hit)


@dataclass(frozen=True)
class Unchecked:
    """A detector that could not decide for a cell, and why."""

    key: str
    label: str
    workload: str
    level: str
    why: str

    def json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "workload": self.workload, "level": self.level, "why": self.why}


MODEL_KNOWS = ("throttling",)  # the pathologies the model predicts itself (a quota's periods: model/instance_sim.py)


@dataclass(frozen=True)
class Why:
    """What the detectors found in an experiment, and where they could not decide."""

    found: tuple[Finding, ...] = ()
    unchecked: tuple[Unchecked, ...] = ()

    def of(self, label: str, workload: str | None = None) -> list[Finding]:
        return [f for f in self.found if f.label == label and (workload is None or f.workload == workload)]

    def json(self) -> dict[str, Any]:
        return {"found": [f.json() for f in self.found], "unchecked": [u.json() for u in self.unchecked]}

    def unmodelled(self) -> frozenset[tuple[str, str, str]]:
        """The cells (label, workload, level) with a pathology the model does not know: a calibration
        learned from them would take the pathology for the server's own work."""
        return frozenset((f.label, f.workload, f.level) for f in self.found if f.key not in MODEL_KNOWS)
