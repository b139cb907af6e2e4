"""A published study beside its reproduction here: per published row, the published figures, the
measured ones (cells of the study file's experiment), the model's prediction for the *original*
conditions, and a verdict per figure; and whether the rankings agree (Kendall's tau). Pure: rows,
cells and the study file's [reproduce] table in, a :class:`Comparison` out.

A row is measured by the configuration whose label is the row's key (published.Row.key), at the
workload the study file maps the row's workload to and at the row's concurrency. The model for the
original runs the row's own processes x threads on the original's cores, with the original's CPU
and wait per request (the study file's [reproduce.workloads]) and the time outside the server that
its single-client row shows (that row's mean minus the work; 0 where it has none).

Where a figure differs, each cause Arena can test is tried by changing that one thing in the model
of the conditions *here* (the configuration measured, this machine's CPUs, the server's CPU per
request measured here, nothing outside the server): the original's cores (and the row's own
processes x threads where the study file scaled them), its CPU per request (the CPU's speed, the
interpreter), the time it spent outside the server (a router, a network). The measured figure
times the model's ratio with and without the change is what that cause alone makes of it; a cause
that lands within EXPLAINED of the published figure explains the difference (the closest, where
several do; all of them together where none does alone). What nothing explains is "unexplained",
with what was tried and what was not: the load tool is the original's (the study files drive the
original's tool), the server's version and the rest of the setup cannot be changed by the model. Of
the version, it names the documented changes between the study's and the one here that touch the
row (results/changes.py, each with its source).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

from arena.plan.study import Original, Reproduction
from arena.results.changes import Between, between
from arena.results.published import FIGURES, Row, Study
from arena.results.aggregate import MiB, Cell, cpu_per_request_ms

LATENCY = ("mean_ms", "median_ms", "p90_ms", "p99_ms")
RANKED_LATENCY = ("p99_ms", "p90_ms", "mean_ms")  # the ranking by latency uses the highest one published


EXPLAINED = 0.15  # a cause explains a difference where the model with it lands this close to the published figure
# the causes a difference is tested for, each one thing changed in the model of the conditions here
CORES, CPU, NETWORK = "the original's cores", "the original's CPU per request", "router and network"
TOGETHER, UNEXPLAINED = "these causes together", "unexplained"


@dataclass(frozen=True)
class Cause:
    """One cause tried on a figure that differs: what was changed, and the figure it makes of the
    measured one (the measured figure times the model's ratio with and without the change)."""

    kind: str  # CORES, CPU, NETWORK or TOGETHER
    change: str  # "4 cores there, 1 here"
    estimate: float | None  # None: the model has no such figure
    explains: bool  # within EXPLAINED of the published figure


@dataclass(frozen=True)
class Verdict:
    agrees: bool | None  # None: nothing measured to compare
    reason: str = ""  # why it differs (or why it could not be compared)
    kind: str = ""  # of a difference: the cause that explains it, or UNEXPLAINED
    causes: tuple[Cause, ...] = ()  # every cause tried, in order

    @property
    def text(self) -> str:
        if self.agrees is None:
            return f"not measured: {self.reason}"
        return "agrees" if self.agrees else f"differs: {self.reason}"


@dataclass(frozen=True)
class Line:
    """One published row here."""

    row: Row
    status: str  # "compared" | "not run" | "no figure" | "not measured"
    why: str = ""  # for a row that is not compared
    label: str = ""  # the configuration here
    level: float | None = None
    published: dict[str, float] = field(default_factory=dict)
    measured: dict[str, float | None] = field(default_factory=dict)
    model: dict[str, float | None] = field(default_factory=dict)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    beyond_model: str = ""  # why the model for the original cannot reach this row (the study file's word)
    changes: tuple[Between, ...] = ()  # the server's documented changes between there and here that touch it

    @property
    def run_here(self) -> bool:
        """Whether the study file runs it (measured or not yet): not a row without figures or left out."""
        return self.status in ("compared", "not measured")


@dataclass(frozen=True)
class Tau:
    figure: str
    tau: float | None  # None: too few rows, or no variation to rank
    p_value: float | None
    n: int

    @property
    def text(self) -> str:
        name = FIGURES[self.figure][0]
        if self.tau is None:
            return f"by {name}: too few rows to rank ({self.n})"
        agrees = "agrees" if self.tau > 0 and self.p_value is not None and self.p_value < 0.05 else (
            "does not agree" if self.tau <= 0 else "agrees weakly (not significant at 5%)")
        return f"by {name}: Kendall's tau {self.tau:+.2f} (p = {self.p_value:.3g}, {self.n} rows): the ranking {agrees}"


@dataclass(frozen=True)
class Comparison:
    study: Study
    reproduction: Reproduction
    lines: list[Line]
    taus: list[Tau]
    here_cpus: int | None  # the server's CPUs here

    def counts(self) -> dict[str, int]:
        """Figures that agree, differ, or were not measured; rows not compared."""
        out = {"agree": 0, "differ": 0, "not measured": 0, "rows not compared": 0}
        for line in self.lines:
            if not line.run_here:
                out["rows not compared"] += 1
            for v in line.verdicts.values():
                out["agree" if v.agrees else "differ" if v.agrees is False else "not measured"] += 1
        return out

    def model_error(self, name: str = "rps", reached: bool = False) -> tuple[float | None, int]:
        """The model for the original against the published figure: MAPE (%) over the rows that
        publish it (whether or not they ran here; ``reached``: less those the study file says it
        cannot reach), and how many. Of an outcome ("completed"), the share of rows it gets wrong (%)."""
        from arena.stats import mape

        pairs = [(ln.model[name], ln.published[name]) for ln in self.lines
                 if name in ln.published and ln.model.get(name) is not None and not (reached and ln.beyond_model)]
        if name == "completed":
            return (100 * sum(m != p for m, p in pairs) / len(pairs) if pairs else None), len(pairs)
        return mape(pairs), len(pairs)

    def beyond(self, name: str, within: float = 0.25) -> list[Line]:
        """The rows the model for the original misses by more than ``within`` of the published figure
        (an outcome: gets wrong)."""
        out = []
        for ln in self.lines:
            m, p = ln.model.get(name), ln.published.get(name)
            if m is None or p is None:
                continue
            if (m != p) if name == "completed" else (p > 0 and abs(m - p) > within * p):
                out.append(ln)
        return out

    @property
    def figure(self) -> str:
        """The figure the model for the original is judged by: throughput, or the outcome where a
        study published no throughput."""
        return "rps" if any("rps" in ln.published for ln in self.lines) else "completed"

    def reasons(self) -> dict[str, int]:
        """How often each cause explains a difference (UNEXPLAINED: none does), the most frequent first."""
        kinds = Counter(v.kind for line in self.lines for v in line.verdicts.values() if v.agrees is False)
        return dict(kinds.most_common())


def overhead_ms(study: Study, rep: Reproduction, workload: str | None) -> float:
    """Time per request outside the server's work in the original, from its own single-client row
    of that workload (its mean minus the CPU and wait per request; 0 where it has no such row)."""
    original = rep.original(workload)
    for row in study.rows:
        if row.workload == workload and row.concurrency == 1 and "mean_ms" in row.figures and original:
            return max(0.0, row.figures["mean_ms"] - original.cpu_ms - original.io_ms)
    return 0.0


@dataclass(frozen=True)
class Conditions:
    """What the mean-value model needs of where a row ran: the server's configuration and CPUs, its
    CPU and wait per request, and the time each request spends outside it."""

    cores: float
    processes: int | None
    threads: int | None
    cpu_ms: float
    io_ms: float
    outside_ms: float = 0.0


def model_at(server: str, at: Conditions, row: Row, timeout_s: float) -> dict[str, float | None]:
    """The mean-value model's figures for ``row``'s load (its concurrency, its mode) in ``at``."""
    from arena.model.calibrate import server_config
    from arena.model.server import Demand, predict_closed

    config = server_config(server, at.processes, at.threads, float(at.cores))
    if row.get("mode") == "serial":  # a lock around the app (Rack::Lock): one request at a time per process
        config = replace(config, threads=1)
    w = Demand(at.cpu_ms, at.io_ms, outside_ms=at.outside_ms, cpu_cv2=0.0)
    p = predict_closed(w, config, int(row.concurrency or 1))
    return {"rps": p.throughput, "mean_ms": p.mean_ms, "median_ms": p.p50_ms, "p90_ms": None, "p99_ms": p.p99_ms,
            "memory_mb": None, "completed": 1.0 if p.p99_ms < timeout_s * 1000 else 0.0}


def original_conditions(row: Row, original: Original, cores: int, outside_ms: float) -> Conditions:
    return Conditions(cores, row.get("processes"), row.get("threads"), original.cpu_ms, original.io_ms, outside_ms)


def model_for_original(row: Row, server: str, original: Original, cores: int, outside_ms: float,
                       timeout_s: float) -> dict[str, float | None]:
    """The mean-value model's figures for the row's configuration in the original's conditions."""
    return model_at(server, original_conditions(row, original, cores, outside_ms), row, timeout_s)


@dataclass(frozen=True)
class Here:
    """Where a row was measured here: the configuration (scaled or not), the server's CPUs, its CPU per
    request as measured (None: no figure), and the tool that drove the load."""

    cpus: int | None
    processes: int | None
    threads: int | None
    cpu_ms: float | None
    driver: str | None = None


def here_of(cell: Cell, cpus: int | None) -> Here:
    """A measured cell's conditions: the median CPU per request of its valid runs."""
    from arena import stats

    cpu = [v for r in cell.valid_runs if (v := cpu_per_request_ms(r)) is not None]
    return Here(cpus, cell.processes, cell.threads, stats.median(cpu) if cpu else None,
                cell.runs[0].driver if cell.runs else None)


def tried_causes(row: Row, server: str, original: Original, cores: int, outside_ms: float, here: Here,
                 timeout_s: float) -> tuple[dict[str, float | None] | None, list[tuple[str, str, dict]]]:
    """The model of the conditions here, and each testable cause with the model with that one change
    (then all of them together, where more than one can be tested); (None, []) where here's CPUs are
    not known."""
    from arena.model.calibrate import server_config

    if here.cpus is None:
        return None, []
    cpu_here = here.cpu_ms if here.cpu_ms is not None else original.cpu_ms
    base = Conditions(here.cpus, here.processes, here.threads, cpu_here, original.io_ms)
    changes: list[tuple[str, str, Conditions]] = []
    there = server_config(server, row.get("processes"), row.get("threads"), float(cores))
    mine = server_config(server, here.processes, here.threads, float(here.cpus))
    rescaled = (there.processes, there.threads) != (mine.processes, mine.threads)
    if cores != here.cpus or rescaled:
        what = f"{cores} cores there, {here.cpus} here" + (
            f", and its {there.processes}x{there.threads or 1} scaled to {mine.processes}x{mine.threads or 1} here"
            if rescaled else "")
        changes.append((CORES, what, replace(base, cores=cores, processes=row.get("processes"),
                                             threads=row.get("threads"))))
    if here.cpu_ms is not None and original.cpu_ms > 0 and abs(here.cpu_ms / original.cpu_ms - 1) > 0.05:
        changes.append((CPU, f"{original.cpu_ms:g} ms of CPU a request there, {here.cpu_ms:.3g} ms here",
                        replace(base, cpu_ms=original.cpu_ms)))
    if outside_ms > 0:
        changes.append((NETWORK, f"{outside_ms:.0f} ms a request outside the server there, from its single-client row",
                        replace(base, outside_ms=outside_ms)))
    if len(changes) > 1:
        changes.append((TOGETHER, " + ".join(k for k, _, _ in changes),
                        original_conditions(row, original, cores, outside_ms)))
    return model_at(server, base, row, timeout_s), [(k, what, model_at(server, c, row, timeout_s))
                                                    for k, what, c in changes]


def measured(cell: Cell, requests: int | None = None) -> dict[str, float | None]:
    """A cell's figures under the published names (medians of the valid repetitions; completed: every
    run answered every request, in its time, without an error: valid or not, a run says that)."""
    ms = lambda f: None if f.median is None else f.median / 1000  # noqa: E731  (us -> ms)
    loaded = [r for r in cell.runs if r.load is not None]
    return {"rps": cell.throughput.median, "mean_ms": cell.response_ms.median, "median_ms": ms(cell.p50_us),
            "p90_ms": ms(cell.p90_us), "p99_ms": ms(cell.p99_us),
            "memory_mb": None if cell.pss_bytes.median is None else cell.pss_bytes.median / MiB,
            "completed": (1.0 if all(r.errors == 0 and _answered(r) >= (requests or 0) for r in loaded) else 0.0)
            if loaded else None}


def _answered(run) -> int:
    m = run.load.measured
    return m.completed + m.errors


def _agree(name: str, a: float, b: float, tolerance: float) -> bool:
    """An outcome ("completed") agrees when equal; a figure, within ``tolerance`` of ``b``."""
    if name == "completed" or b == 0:
        return a == b
    return abs(a - b) / abs(b) <= tolerance


def verdict(name: str, published: float, here: float | None, base: dict[str, float | None] | None,
            tried: list[tuple[str, str, dict]], rep: Reproduction, untested: str, flags: tuple[str, ...]) -> Verdict:
    """Whether a measured figure agrees with the published one, and if not, which cause explains the
    difference (the module's docstring: each tested by changing that one thing), or that none does
    (``untested``: what the model cannot change, said with it)."""
    if here is None:
        return Verdict(None, "; ".join(flags) or "no valid run")
    if _agree(name, here, published, rep.tolerance):
        return Verdict(True)
    causes = []
    for kind, what, m in tried:
        est = _changed(name, here, (base or {}).get(name), m.get(name))
        causes.append(Cause(kind, what, est, est is not None and _agree(name, est, published, EXPLAINED)))
    alone = [c for c in causes if c.explains and c.kind != TOGETHER]
    best = min(alone, key=lambda c: abs(c.estimate - published)) if alone else next(
        (c for c in causes if c.explains), None)
    if best is not None:
        return Verdict(False, f"explained by {best.kind} ({best.change}): with {'them' if best.kind == TOGETHER else 'it'} "
                              f"the {_fmt(name, here)} measured here makes {_fmt(name, best.estimate)}", best.kind,
                       tuple(causes))
    said = "; ".join(f"{c.kind} ({c.change}): {_fmt(name, c.estimate)}" for c in causes if c.estimate is not None)
    tried_text = (f"no cause tried lands within {EXPLAINED:.0%} ({said})" if said else
                  f"the model gives no {FIGURES[name][0]} to try a cause with" if causes else
                  "no cause the model can try differs between there and here")
    return Verdict(False, f"{UNEXPLAINED}: {tried_text}; {untested}", UNEXPLAINED, tuple(causes))


def _changed(name: str, here: float, base: float | None, changed: float | None) -> float | None:
    """The measured figure with one thing changed: times the model's ratio with and without it (an
    outcome, "completed": the model's own with the change)."""
    if changed is None:
        return None
    if name == "completed":
        return changed
    if base is None or base <= 0 or not math.isfinite(base) or not math.isfinite(changed):
        return None
    return here * changed / base


def untested_text(study: Study, driver: str | None, version: str | None, changes: list[Between] = ()) -> str:
    """What the model cannot change, as said beside an unexplained difference: the load tool (the
    original's where the study file drives it), the server's version (with the documented changes
    between there and here that touch the row), the rest of the setup."""
    tool = str(study.conditions.get("load", {}).get("tool", ""))
    same = driver is not None and driver.lower() in tool.lower()
    tool_text = f"the load tool is the original's ({driver})" if same else (
        f"the load tool differs ({driver} here, {tool or 'not stated'} there)" if driver else "")
    documented = ("; documented changes since the study's: " + ", ".join(
        b.change.version + ("?" if b.perhaps else "") for b in changes) if changes else "")
    rest = ("not tested: the server's version" + (f" (here {version or 'not known'}{documented})" if version or changes
                                                   else "") + " and the rest of the setup")
    return f"{tool_text}; {rest}" if tool_text else rest


def _fmt(name: str, v: float) -> str:
    if name == "completed":
        return "completes" if v else "does not complete"
    return f"{v:.0f} {FIGURES[name][1]}".strip() if abs(v) >= 100 else f"{v:.3g} {FIGURES[name][1]}".strip()


def compare(study: Study, rep: Reproduction, cells: list[Cell], servers: dict[str, str], timeout_s: float,
            here_cpus: int | None = None, versions: dict[str, str | None] | None = None,
            requests: int | None = None) -> Comparison:
    """Every row of ``study`` beside the cells of its study file. ``servers``: each configuration's
    label -> its catalog server (the model needs it where a row was not measured too); ``requests``:
    what each run was to answer, where runs are bounded by a count (a run that answered fewer did not
    complete)."""
    versions = versions or {}
    by_key = {(c.label, c.workload, c.level): c for c in cells if c.model == "closed"}
    lines = []
    for row in study.rows:
        skip = rep.why_not_run(f"{row.key} c={row.concurrency}", row.key, row.workload, row.get("table"))
        figures = row.figures
        original = rep.original(row.workload)
        if not figures:
            lines.append(Line(row, "no figure", row.why_not_compared or ""))
            continue
        if skip:
            lines.append(Line(row, "not run", skip, published=figures))
            continue
        label = rep.label(row.key)
        if label not in servers or original is None or row.concurrency is None:
            what = ("no configuration labelled " + repr(label) if label not in servers
                    else f"no [reproduce.workloads.{row.workload or 'default'}]" if original is None else "no concurrency")
            lines.append(Line(row, "not run", f"the study file has {what}", published=figures))
            continue
        outside = overhead_ms(study, rep, row.workload)
        model = model_for_original(row, servers[label], original, rep.cores, outside, timeout_s)
        cell = by_key.get((label, original.workload, float(row.concurrency)))
        here = measured(cell, requests) if cell else {}
        flags = cell.flags if cell else ("not run yet",)
        at = here_of(cell, here_cpus) if cell else None
        base, tried = tried_causes(row, servers[label], original, rep.cores, outside, at, timeout_s) if at else (None, [])
        changes = between(study, row, servers[label], versions.get(servers[label]))
        untested = untested_text(study, at.driver if at else None, versions.get(servers[label]), changes)
        verdicts = {k: verdict(k, v, here.get(k), base, tried, rep, untested, flags) for k, v in figures.items()}
        measured_ok = any(v.agrees is not None for v in verdicts.values())  # an outcome counts invalid runs too
        lines.append(Line(row, "compared" if measured_ok else "not measured", "" if measured_ok else "; ".join(flags),
                          label, float(row.concurrency), figures, here, model, verdicts,
                          dict(rep.beyond_model).get(row.text, ""), tuple(changes)))
    return Comparison(study, rep, lines, taus(lines), here_cpus)


def taus(lines: list[Line]) -> list[Tau]:
    """Kendall's tau-b (ties allowed) between the published and the measured ranking of the compared
    rows, by throughput and by the highest latency percentile published (or completion, for a study
    that published outcomes)."""
    from scipy.stats import kendalltau

    compared = [ln for ln in lines if ln.status == "compared"]
    names = [n for n in ("rps", *RANKED_LATENCY, "completed") if any(n in ln.published for ln in compared)]
    latency = next((n for n in RANKED_LATENCY if n in names), None)
    out = []
    for name in [n for n in ("rps", latency, "completed") if n in names]:
        pairs = [(ln.published[name], ln.measured[name]) for ln in compared
                 if name in ln.published and ln.measured.get(name) is not None]
        tau = p = None
        if len(pairs) >= 3 and len({a for a, _ in pairs}) > 1 and len({b for _, b in pairs}) > 1:
            result = kendalltau([a for a, _ in pairs], [b for _, b in pairs])
            if not math.isnan(result.statistic):
                tau, p = float(result.statistic), float(result.pvalue)
        out.append(Tau(name, tau, p, len(pairs)))
    return out
