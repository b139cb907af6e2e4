"""The report as data: cells, runs and the model's findings (model/findings.py, computed by app)
in, a :class:`Report` out (sections of charts, tables and notes, plain text everywhere). Pure, and
formats only. report/html.py renders it as one HTML file, report/export.py its charts as CSV and
SVG/PNG, report/summary.py a run's ab-style summary; ``arena show`` prints its answer and tables."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Sequence

from arena.clients import SEGMENT, SLOW_RCVBUF, Clients
from arena.plan.stored import StoredExperiment
from arena.report import charts as ch
from arena.report.soak_view import soak_lines
from arena.report.style import paint
from arena.results.aggregate import MiB, Cell, labels, workloads
from arena.report.answer_view import (ANSWER_HEAD, answer_rows, experiment_json, headline, interval_text, notes,
                                 threshold_lines)
from arena.results.answer import Answer
from arena.results import validity
from arena.results.runs import Run, level_label
from arena.results.why.diagnose import shown_in
from arena.results.why.finding import Why
from arena.servers.sizing import NOT_CORES, SIZINGS

SECTIONS = (
    ("throughput", "Throughput", "How many requests per second each configuration served at each load level."),
    ("latency", "Latency", "Percentiles against load, and the whole percentile spectrum at a chosen level."),
    ("heatmap", "Processes x threads", "Each server's grid at its highest load level."),
    ("decomposition", "Where the latency went",
     "The mean response time split into queueing before the app, waiting for the GIL/GVL or a core while "
     "computing (cpuwall - cpu), CPU, I/O, the rest of the app, and everything outside the app. The request "
     "thread's CPU is checked against the server's whole CPU per request (its cgroup): beyond 1.2 times it, the "
     "difference is CPU the request waited for in other threads (an async app's thread pool), shown as CPU "
     "outside the request thread."),
    ("cpu", "CPU: the server and its services",
     "Cores kept busy over each run's measured window by the server's processes and by each service "
     "(the database, the downstream API), from their own cgroups: what the database takes from a box it shares."),
    ("balance", "Balance across worker processes", "Who answered the requests (the X-Arena-Pid of each response)."),
    ("memory", "Memory", "PSS and USS summed over each server's processes, and throughput per GB."),
    ("errors", "Errors", "Transport errors by class and non-2xx responses by status."),
    ("time-series", "Time series", "Second by second, so stalls and warm-up effects show."),
    ("tuning", "Tuning path",
     "What the search tried, in order, and why: the calibration, the race (a contender leaves only when it "
     "is surely worse than the leader), each finalist's capacity bracket and its confirmation."),
    ("model", "Model: predicted vs measured",
     "The queueing model (arena.model) calibrated from each server's lowest-load runs, then asked for every "
     "configuration and load level; the error is (predicted - measured) / measured of throughput."),
)

INTERVALS = ("Intervals are of the statistic they stand beside: beside a median, a distribution-free 95% "
             "confidence interval of the median from order statistics (Conover), which needs 6 or more valid "
             "repetitions; with 2 to 5, the range of the repetitions is shown instead and marked as a range.")


nice = ch.nice  # one way to print a figure in tables and charts



def clients_note(definition: StoredExperiment) -> str:
    """The method's sentence on the clients: keep-alive or not, and each workload's emulated link
    (where the workloads cannot be read: the experiment's keep_alive alone)."""
    found = definition.workloads
    texts = {name: w.clients.text for name, w in found.items()} or {"default": Clients(definition.keep_alive).text}
    said = (next(iter(texts.values())) if len(set(texts.values())) == 1
            else "; ".join(f"{name}: {text}" for name, text in texts.items()))
    note = f"Clients: {said}."
    if any(w.clients.link for w in found.values()):
        note += (" Slow and far clients are emulated by arena-load per connection (loopback has no network): a "
                 "one-way delay before each request reaches the server and before each response reaches the client "
                 "(a new connection also waits out the handshake's round trip, and the server accepts it with its "
                 f"request), the request and the response moved in segments of {SEGMENT} bytes at the capped rates, "
                 f"and a {SLOW_RCVBUF // 1024} KiB receive buffer, so a server's writes stall behind a slow reader "
                 "once its own send buffer is full.")
    return note

@dataclass
class Table:
    head: list[str]
    rows: list[list[str]]  # plain text: renderers escape it
    cls: str = ""
    title: str = ""


@dataclass(frozen=True)
class Opening:
    """One workload's answer as the report opens with it: one sentence, a small table (the best, the
    group tied with it, each server's best), then the notes (what binds, what was left out, the method)."""

    headline: str
    table: Table
    notes: list[str]


@dataclass
class Section:
    key: str
    title: str
    lead: str
    charts: list[ch.Chart] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


@dataclass
class Report:
    name: str
    description: str
    runs: int
    valid: int
    configurations: int
    opening: list[Opening]  # per workload: what is best and why, how sure, what was left out
    sections: list[Section]
    method: list[str]
    environment: Table
    definition: Table
    answer_json: dict = field(default_factory=dict)  # the answer as arena show --json gives it (schemas/answer.schema.json)

    @property
    def answer(self) -> list[str]:
        """The opening's sentences, in order (its tables aside)."""
        return [line for o in self.opening for line in (o.headline, *o.notes)]

    @property
    def charts(self) -> list[ch.Chart]:
        return [c for s in self.sections for c in s.charts]


def comparison_table(cells: list[Cell]) -> Table:
    """Per configuration (and workload, when there are several) and level: medians, intervals,
    memory; the cores the server kept busy and each service's beside them, where services ran; what
    the database refused; and validity."""
    many = len(workloads(cells)) > 1
    kinds = list(dict.fromkeys(k for c in cells for k in c.service_cores))
    db = any(c.database.note() for c in cells)
    throttled = any(c.throttled_ms_per_s.median for c in cells)  # a CPU quota held some run back
    head = ["configuration"] + (["workload"] if many else []) + [
        "level", "valid/runs", "req/s", "req/s interval", "p50 ms", "p99 ms", "p99 interval", "PSS MiB",
        "PSS MiB/worker"]
    head += (["server CPU cores"] + [f"{k} CPU cores" for k in kinds] if kinds else []) + (["database"] if db else [])
    head += ["throttled ms/s"] if throttled else []
    rows = []
    for c in cells:
        row = [c.label] + ([c.workload] if many else []) + [
            c.level_label, f"{c.valid}/{c.total}", nice(c.throughput.median, 4), interval_text(c.throughput),
            nice(c.p50_us.median and c.p50_us.median / 1000), nice(c.p99_us.median and c.p99_us.median / 1000),
            interval_text(c.p99_us, 1000), nice(c.pss_bytes.median and c.pss_bytes.median / MiB),
            nice(c.pss_bytes.median and c.pss_bytes.median / MiB / (c.processes or 1))]
        if kinds:
            row += [nice(c.cpu_cores.median)] + [nice(c.service_cores[k].median) if k in c.service_cores else "-"
                                                 for k in kinds]
        if db:
            row.append(c.database.note() or "-")
        if throttled:
            row.append(nice(c.throttled_ms_per_s.median))
        rows.append(row + ["; ".join(c.flags) or "ok"])
    return Table(head + ["validity"], rows, "comparison")


def app_metrics_table(cells: list[Cell]) -> Table | None:
    """The app's own Server-Timing metrics (a Rails app's sql.active_record, a Django app's sql) per
    configuration and level: mean ms per request and their share of the mean response time. They
    are the app's view and overlap Arena's parts (SQL time holds the driver's CPU and the wait)."""
    names = list(dict.fromkeys(k for c in cells for k in c.app_metrics))
    if not names:
        return None
    rows = []
    for c in cells:
        if not c.app_metrics:
            continue
        mean_ms = c.response_ms.median
        row = [c.label, c.level_label, nice(mean_ms)]
        for k in names:
            ms = c.app_metrics[k].median if k in c.app_metrics else None
            row += [nice(ms), f"{100 * ms / mean_ms:.0f}%" if ms is not None and mean_ms else "-"]
        rows.append(row)
    head = ["configuration", "level", "mean response ms"] + [h for k in names for h in (f"{k} ms", f"{k} share")]
    return Table(head, rows, "app-metrics", "The app's own Server-Timing metrics (mean per request)")


def chain(run: Run) -> str | None:
    """The deployment of a run as a drawing in one line: client -> front -> instances, with where
    each ran (None: a bare server)."""
    launch, env = run.launched, run.environment
    t, front = launch.topology, launch.front
    if t is None or front is None:
        return None
    cpus = list(dict.fromkeys(i.cpus for i in launch.instances if i.cpus))
    where = f"CPUs {' | '.join(cpus)}" if cpus else "any CPU"
    over = "unix sockets" if t.upstream == "unix" else "TCP"
    return (f"client ({run.driver}, CPUs {env.load_cpus or '-'}) -> {front.kind} {front.version or ''} "
            f"(CPUs {env.service_cpus or env.server_cpus or '-'}) -> {len(launch.instances)} x {run.server} ({where}) "
            f"over {over}")


def container_lines(runs: list[Run], node_cores: int | None) -> list[str]:
    """For each server run under a CPU quota: what its documented process count comes to in a
    container on this machine as its node (servers/sizing.py), beside what the quota would give."""
    quotas: dict[str, set[float]] = {}
    for r in runs:
        cpu = r.launched.limits.cpu
        if cpu is not None:
            quotas.setdefault(r.server, set()).add(cpu)
    if not quotas or node_cores is None:
        return []
    lines = []
    for server, qs in quotas.items():
        z = SIZINGS.get(server)
        if z is None:
            continue
        came = "; ".join(dict.fromkeys(z.inside(node_cores, q) for q in sorted(qs)))
        lines.append(f"Inside a container on this machine as its node: {server}'s documented process count, {z.rule}, "
                     f"comes to {came} ({z.reference}).")
    return lines + [NOT_CORES] if lines else []


def explained(points: Sequence, why: Why) -> list[str]:
    """For each pathology found that adds a known time at p99 to a point the model predicted (from a
    calibration that left its cells out): the p99 error as measured, and with that time taken out."""
    return [line for f in why.found for p in points
            if p.label == f.label and p.workload == f.workload and level_label(p.model, p.level) == f.level
            and (line := f.explains(p.predicted.p99_ms, p.measured_p99_ms)) is not None]




def why_section(why: Why) -> Section | None:
    """The known pathologies found (results/why), each with its evidence, cost, reference and fix."""
    if not why.found and not why.unchecked:
        return None
    rows = [[f.label, f.level, f.name, "; ".join(e.text for e in f.evidence), f.effect, f.confidence, f.fix,
             f.reference, shown_in(f.key)] for f in why.found]
    section = Section("why", "Why it is slow",
                      "The known pathologies behind the latencies, each named from the runs' evidence: what it cost, "
                      "how sure the evidence is, the change that avoids it and the upstream reference.",
                      tables=[Table(["configuration", "level", "pathology", "evidence", "effect", "confidence",
                                     "avoid it", "reference", "shown in"], rows)] if rows else [])
    if not rows:
        section.paragraphs.append("No known pathology found.")
    section.paragraphs += [f"Not checked: {u.label} at {u.level}, {u.key}: {u.why}." for u in why.unchecked]
    return section


def topology_section(cells: list[Cell]) -> Section | None:
    """Where requests went: each configuration's chain, and per level the front's cores, the
    balancer's queue time and how the instances shared the requests."""
    chains = {c.label: chain(c.runs[0]) for c in cells}
    fronted = [c for c in cells if chains[c.label]]
    if not fronted:
        return None
    section = Section("topology", "Topology: proxy, balancer and instances",
                      "What stood between the clients and the server, and where each part ran. A balancer's queue "
                      "time is its own log's Tw (waiting for an instance's free connection slot under maxconn); a "
                      "request that waits at an instance instead (in its accept queue) shows in the app's queue "
                      "time, counted from the client's send.")
    section.tables.append(Table(["configuration", "chain"], [[k, v] for k, v in chains.items() if v], "chain",
                                "The deployments"))
    rows = []
    for c in fronted:
        kind = c.runs[0].launched.front.kind
        queue = (c.decomposition or {}).get("queue")
        f = c.front
        rows.append([c.label, c.level_label, nice(c.throughput.median, 4), nice(c.p99_us.median and c.p99_us.median / 1000),
                     nice(queue), nice(f.queue_ms.median) if f else "-", nice(f.queue_p99_ms.median) if f else "-",
                     " / ".join(f"{x:.0f}" for x in f.shares) if f and f.shares else "-",
                     nice(c.service_cores[kind].median) if kind in c.service_cores else "-"])
    section.tables.append(Table(["configuration", "level", "req/s", "p99 ms", "app queue ms (mean)",
                                 "balancer queue ms (mean)", "balancer queue p99 ms", "requests per instance %",
                                 "front CPU cores"], rows, "topology", "Per level: medians of the valid repetitions"))
    return section


def _ranking_table(title: str, cells: list[Cell]) -> Table:
    rows = [[c.label, c.workload, c.level_label, f"{c.throughput.median:.1f}", nice(c.p99_us.median and c.p99_us.median / 1000),
             nice(c.pss_bytes.median and c.pss_bytes.median / MiB), f"{c.valid}/{c.total}", "; ".join(c.flags) or "ok"]
            for c in cells]
    return Table(["configuration", "workload", "best level", "req/s (median)", "p99 ms", "PSS MiB", "valid/runs",
                  "validity"], rows, "ranking", title)


def model_section(cells: list[Cell], found, why: Why = Why()) -> Section:
    """The model's findings (model/findings.py ModelFindings) against the measurements: charts, the
    calibration, every point, the USL fits, and where a pathology found explains a gap between a
    prediction and its measurement, the error with and without it. Formats only: the findings come
    computed."""
    key, title, lead = SECTIONS[-1]
    section = Section(key, title, lead)
    points, calibrations = found.points, found.calibrations
    if not points and not calibrations:
        return section
    section.paragraphs += explained(points, why)
    names = workloads(cells)
    section.charts = [ch.model_vs_measured(points, w, len(names) > 1, ch.load_axis(cells)) for w in names
                      if any(pt.workload == w for pt in points)]
    section.charts += [c for w in names if (c := ch.p99_model_vs_measured(points, w, len(names) > 1, ch.load_axis(cells)))]
    error = found.throughput_mape
    predicted = [p for p in points if not p.calibration_run]
    section.paragraphs.append(f"Mean absolute percentage error of throughput: {error:.1f}% over {len(predicted)} "
                              "predicted points (the calibration level excluded)." if error is not None
                              else "No point to predict beyond the calibration level.")
    sim_p99, mva_p99 = found.p99_mape_simulated, found.p99_mape_model
    if sim_p99 is not None and mva_p99 is not None:
        section.paragraphs.append(
            f"Mean absolute percentage error of p99: simulated {sim_p99:.1f}%, mean-value model {mva_p99:.1f}% "
            "(the simulator runs each configuration with its server's accept discipline, from its catalog entry or "
            "learned at the first level with queueing, which is then left out of its error, and the calibration's "
            "measured service-time distributions; fleets behind a balancer are left to the mean-value model).")
    own_error = found.own_mape
    if own_error is not None and error is not None:
        section.paragraphs.append(
            f"Calibrated instead for each configuration from its own lowest-load runs (what differs between "
            f"configurations at low load is then measured, not predicted): {own_error:.1f}% over "
            f"{sum(not p.calibration_run for p in found.own_points)} points.")
    db = found.with_database
    cal_rows = []
    for (server, workload), cal in calibrations.items():
        if isinstance(cal, str):
            cal_rows.append([server, workload, cal] + [""] * (7 if db else 5))
        else:
            cal_rows.append([server, workload, str(cal.cpu_ms), str(cal.io_ms), str(cal.outside_ms),
                             str(cal.gil_wait_ms or "-"), f"{cal.cores:g}"]
                            + ([str(cal.db_ms or "-"), str(cal.db_cpu_ms or "-")] if db else [])
                            + [found.disciplines.get((server, workload), "")])
    section.tables.append(Table(["server", "workload", "CPU ms/request", "I/O ms", "outside ms", "GIL/CPU wait ms",
                                 "cores"] + (["database ms (connection held)", "database CPU ms"] if db else [])
                                + ["accept discipline (simulator)"],
                                cal_rows, "calibration", "Calibration (lowest-load runs)"))
    from arena.results.runs import level_label

    section.tables.append(Table(
        ["configuration", "workload", "level", "measured req/s", "predicted req/s", "error", "measured p99 ms",
         "predicted p99 ms", "simulated p99 ms", "what binds (model)"],
        [[p.label, p.workload, level_label(p.model, p.level), f"{p.measured:.1f}", f"{p.predicted.throughput:.1f}",
          "calibration" if p.calibration_run else f"{100 * p.error:+.1f}%", nice(p.measured_p99_ms),
          nice(p.predicted.p99_ms), nice(p.simulated and p.simulated.prediction.p99_ms),
          p.predicted.binding] for p in points], "model", "Every point"))
    usl_rows = []
    for label, workload, fit in found.usl:
        if isinstance(fit, str):
            usl_rows.append([label, workload, "-", "-", "-", "-", fit])
            continue
        (slo, shi), (klo, khi), _ = fit.ci95
        peak = ("none shown (the crosstalk's interval reaches 0)" if not fit.peak_shown else
                f"{fit.peak_n:.1f} ({fit.peak_throughput:.1f} req/s)" if fit.peak_measured else
                f"extrapolated: {fit.peak_n:.1f} ({fit.peak_throughput:.1f} req/s), beyond the {fit.measured[1]:g} measured")
        usl_rows.append([label, workload, f"{fit.sigma:.4f} [{slo:.4f}, {shi:.4f}]", f"{fit.kappa:.5f} [{klo:.5f}, {khi:.5f}]",
                         f"{fit.lam:.2f}", peak, f"{fit.points} runs"])
    section.tables.append(Table(["configuration", "workload", "sigma (contention)", "kappa (crosstalk)", "lambda req/s",
                                 "peak concurrency", "data"], usl_rows, "usl",
                                "Universal Scalability Law fits (throughput against concurrency, 95% t-intervals of the "
                                "fitted parameters)"))
    return section


def published_section(comparison) -> Section:
    """A reproduced study beside its published figures: charts, the table and its verdicts, the rank
    agreement (reproduce/verdicts.py)."""
    from arena.results.published import FIGURES

    c, rep = comparison, comparison.reproduction
    section = Section("published", "Published vs here",
                      f"{c.study.title}. {c.study.citation}; figures transcribed in src/arena/results/published.toml "
                      f"(study {c.study.id}). Each published row beside the median of the valid runs here "
                      f"({c.here_cpus or '?'} server CPU(s)) and the mean-value model's prediction for the original's "
                      f"conditions ({rep.cores} cores, the original's work per request, its time outside the server); "
                      f"a figure agrees within {rep.tolerance:.0%}.", charts=ch.published_vs_here(c))
    value = lambda n, v: "-" if v is None else ("yes" if v else "no") if n == "completed" else nice(v)  # noqa: E731
    rows = [[ln.row.text, FIGURES[n][0], value(n, v), value(n, ln.measured.get(n)), value(n, ln.model.get(n)),
             ln.verdicts[n].text] for ln in c.lines if ln.run_here for n, v in ln.published.items()]
    section.tables.append(Table(["published row", "figure", "published", "here", f"model ({rep.cores} cores)", "verdict"],
                                rows, "published", "Published vs here, figure by figure"))
    skipped = [[ln.row.text, ln.why] for ln in c.lines if not ln.run_here]
    if skipped:
        section.tables.append(Table(["published row", "why it is not compared"], skipped, "not-compared",
                                    "Published rows not compared"))
    n = c.counts()
    reasons = "; ".join(f"{kind}: {k}" for kind, k in c.reasons().items())
    section.paragraphs.append(f"{n['agree']} figures agree, {n['differ']} differ, {n['not measured']} were not measured"
                              + (f" (why they differ: {reasons})." if reasons else "."))
    section.paragraphs += [f"Rank agreement {t.text}." for t in c.taus]
    error, n_rows = c.model_error(c.figure)
    if error is not None:
        beyond = [[ln.row.text, ln.beyond_model] for ln in c.lines if ln.beyond_model]
        reached, n_reached = c.model_error(c.figure, reached=True)
        what = "rows whose outcome it gets wrong" if c.figure == "completed" else "mean absolute percentage error"
        section.paragraphs.append(
            f"The model for the original conditions against the published "
            f"{'throughput' if c.figure == 'rps' else FIGURES[c.figure][0]}: {what} "
            f"{error:.1f}% over {n_rows} rows" + (
                f"; {reached:.1f}% over the {n_reached} it can reach (the table of the {len(beyond)} it cannot "
                "says why)."
                if beyond and reached is not None else "."))
        if beyond:
            section.tables.append(Table(["published row", "why the model for the original cannot reach it"], beyond,
                                        "beyond-model", "Published rows beyond the model for the original"))
    return section


def _definition_rows(d: dict, prefix: str = "") -> list[list[str]]:
    rows = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            rows += _definition_rows(v, key + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for i, item in enumerate(v):
                rows += _definition_rows(item, f"{key}[{i}].")
        else:
            rows.append([key, json.dumps(v) if not isinstance(v, str) else v])
    return rows


def tuning_section(runs: list[Run], steps: Sequence[tuple[str, str]], goal, capacities: Sequence = ()) -> Section | None:
    """A search's path (arena tune, find = "capacity"): each configuration's capacity, its runs in
    order, charted, and its steps; None for an experiment no search ran."""
    if not steps and not capacities and not any((r.why or "").startswith("tune:") for r in runs):
        return None
    key, title, lead = next(s for s in SECTIONS if s[0] == "tuning")
    section = Section(key, title, lead, ch.tuning_path(runs, goal.p99_ms if goal else None))
    if capacities:
        section.tables.append(Table(
            ["configuration", "workload", "capacity req/s", "lowest rate beyond", "runs there", "confirmed",
             "p99 ms there"],
            [[label, workload, nice(c.lo), nice(c.hi), str(c.runs_at_lo), "yes" if c.confirmed else "no",
              "-" if c.p99_ms is None or c.p99_ms.median is None else f"{nice(c.p99_ms.median)} ({interval_text(c.p99_ms)})"]
             for label, workload, c in capacities], title="Capacity within the goal"))
    if steps:
        section.tables.append(Table(["#", "stage", "what and why"], [[str(i), stage, text] for i, (stage, text)
                                                                     in enumerate(steps, 1)], title="Steps"))
    return section


TOP = 12  # the configurations a report charts by default (beside each server's best)


def charted(answers: Sequence[Answer], cells: list[Cell], top: int = TOP) -> set[str]:
    """The configurations (ServerConfig.key) the charts draw: each workload's ``top`` best placed in its
    answer (the best, then the others in their standing), each server's best, and, where fewer keep
    within the goal, the first others measured, up to ``top``. Every one where there are no more."""
    every = list(dict.fromkeys(c.config for c in cells))
    if len(every) <= top:
        return set(every)
    shown: set[str] = set()
    for a in answers:
        placed = list(dict.fromkeys(c.config for c in a.placed))
        shown |= set(placed[:top]) | {p.cell.config for p in a.per_server}
    for config in every:
        if len(shown) >= top:
            break
        shown.add(config)
    return shown


def _ranking_section(answers: Sequence[Answer], goal, configurations: int, shown: set[str] | None) -> Section:
    """Each configuration's best level within the goal: the best per server, then every one."""
    section = Section("ranking", "Ranking",
                      f"Goal: {goal}. For each configuration, the load level with the highest median throughput "
                      "within the goal; invalid runs are left out of the medians and their flags listed.")
    if shown is not None and len(shown) < configurations:
        section.paragraphs.append(
            f"The charts draw {len(shown)} of the {configurations} configurations: the best in the answer's standing "
            "and each server's best (the heatmaps draw every one; arena report --top sets how many). Every "
            "configuration is in the tables; type in a table's filter to find one.")
    placed = [c for a in answers for c in a.placed]
    section.tables = [_ranking_table("Best configuration per server", [p.cell for a in answers for p in a.per_server]),
                      _ranking_table("Every configuration", placed)]
    if not placed:
        section.paragraphs.append("No configuration keeps within the goal.")
    return section


def _chart_sections(by_section: dict[str, list[ch.Chart]], cells: list[Cell], ran: bool) -> list[Section]:
    """The charts' sections in their order (no errors said in a sentence), the app's own metrics beside
    the decomposition."""
    sections = []
    for key, title, lead in SECTIONS[:-1]:
        if by_section.get(key):
            sections.append(Section(key, title, lead, by_section[key]))
        elif key == "errors" and ran:  # no errors is a result, said in a sentence rather than drawn as zeros
            sections.append(Section(key, title, lead, paragraphs=[
                "No errors: every request of every run was answered, with an expected status."]))
    own = app_metrics_table(cells)
    if own is not None:
        decomposition = next((s for s in sections if s.key == "decomposition"), None)
        if decomposition is None:
            decomposition = Section(*next(s for s in SECTIONS if s[0] == "decomposition"))
            sections.append(decomposition)
        decomposition.tables.append(own)
        decomposition.paragraphs.append(
            "The app's own Server-Timing metrics are its view of its work (time in SQL holds the database driver's "
            "CPU as well as the wait for the database): they overlap the parts above and are shown beside them.")
    return sections


def _method(definition: StoredExperiment, runs: list[Run]) -> list[str]:
    """How the runs were made: the load, the window, the repetitions, the CPUs, the validity rules,
    the intervals, the clients, the container's limits and the environments."""
    env = runs[0].environment if runs else None
    envs = {json.dumps(r.environment.__dict__, sort_keys=True) for r in runs}
    drivers = sorted({r.driver for r in runs})
    reused = sum(r.server_reused for r in runs)
    method = [
        f"Load: {', '.join(drivers)}; {', '.join(sorted({r.model for r in runs}))} model; measured for "
        f"{definition.duration or definition.requests or '-'} after a warm-up of {definition.warmup or '-'} "
        f"(discarded) at each level; {definition.repetitions} repetition(s), in a shuffled order. {reused} of "
        f"{len(runs)} runs reused a server started for a lower level of the same configuration (after their own "
        f"warm-up). Server and load generator on separate CPUs (server {env.server_cpus if env else '-'}, load "
        f"{env.load_cpus if env else '-'}). Percentiles: nearest rank.",
        validity.method(definition.validity),
        INTERVALS,
        clients_note(definition),
    ]
    method += container_lines(runs, env.cpus if env and env.cpus else None)
    if len(envs) > 1:
        method.append(f"The runs ran in {len(envs)} different environments; the first is shown.")
    return method


def build(name: str, definition: StoredExperiment, runs: list[Run], cells: list[Cell], found,
          answers: Sequence[Answer], comparison=None, thresholds: Sequence = (),
          steps: Sequence[tuple[str, str]] = (), capacities: Sequence = (), shown: set[str] | None = None,
          soaks: Sequence = (), why: Why = Why()) -> Report:
    """The whole report of one experiment, opening with its ``answers`` (results/answer.py, one per
    workload; ``comparison``: its published study beside it, when it reproduces one). Its charts draw
    the configurations ``shown`` (None: every one; the heatmaps draw every one anyway: a grid is read
    whole), its tables every one."""
    by_section: dict[str, list[ch.Chart]] = {}
    for c in ch.all_charts(cells, runs, shown):
        by_section.setdefault(c.section, []).append(c)
    goal = answers[0].goal if answers else None
    sections = [_ranking_section(answers, goal, len(labels(cells)), shown)]
    sections.append(Section("table", "Comparison table",
                            "Per configuration and load level: medians of the valid repetitions and intervals of "
                            "those medians (see Environment and method).", tables=[comparison_table(cells)]))
    slow = why_section(why)
    if slow is not None:
        sections.append(slow)
    if comparison is not None:
        sections.append(published_section(comparison))
    sections += _chart_sections(by_section, cells, bool(runs))
    topology = topology_section(cells)
    if topology is not None:
        sections.append(topology)
    memory_over_requests = ch.soak_memory(soaks)
    if memory_over_requests is not None:
        sections.append(Section("soak", "Soak: memory against requests",
                                "Each worker's PSS sampled over a soak against the requests it had served by then: "
                                "a line's slope is its growth, fitted by least squares with a 95% interval.",
                                [memory_over_requests], [line.strip() for s in soaks for line in soak_lines(s)]))
    tuning = tuning_section(runs, steps, goal, capacities)
    if tuning is not None:
        sections.insert(2, tuning)
    model = model_section(cells, found, why)
    if model.charts or model.paragraphs:
        sections.append(model)
    report_charts = [c for s in sections for c in s.charts]
    paint(report_charts, labels(cells))

    opening = [Opening(headline(a, len(answers) > 1), Table(list(ANSWER_HEAD), answer_rows(a), "answer-table"),
                       notes(a) + (threshold_lines(thresholds) if i == 0 else [])) for i, a in enumerate(answers)]
    env = runs[0].environment if runs else None
    method = _method(definition, runs)
    env_rows = [[k, json.dumps(v) if not isinstance(v, str) else v] for k, v in (env.__dict__ if env else {}).items()]
    return Report(name, definition.description, len(runs), sum(r.valid for r in runs), len(labels(cells)),
                  opening, sections, method, Table(["item", "value"], env_rows),
                  Table(["key", "value"], _definition_rows(definition.document)),
                  experiment_json(name, list(answers), cells, thresholds, capacities, why))
