"""``arena predict``: the model's figures for one configuration (``--json``: schemas/predict.schema.json)."""

import math

from rich.markup import escape
from rich.table import Table

from arena.app.predict import Given, Load, prediction
from arena.model.fit import GOOD
from arena.cli.args import (MODEL_CLIENTS, MODEL_MS, add_processes_threads, add_store, say_store, count, listof, positive,
                            add_format, print_json)
from arena.report.model_json import predict_json
from arena.model.simulated import REPLICATIONS, REQUESTS, discipline, discipline_of

NAME = "predict"


def add(sub) -> None:
    pr = sub.add_parser(NAME, help="predict throughput and latency of a configuration (queueing model)")
    pr.add_argument("experiment", nargs="?", help="calibrate from this experiment's runs (else give --cpu-ms, --io-ms)")
    add_store(pr)
    pr.add_argument("--server", required=True, help="a server name from `arena servers`")
    pr.add_argument("--workload", help="the experiment's workload to calibrate from (default: its first)")
    add_processes_threads(pr)
    pr.add_argument("--cores", type=positive("--cores", lo=0.01, hi=4096), help="server cores (default: the experiment's, else 1)")
    pr.add_argument("--cpu-limit", type=positive("--cpu-limit", hi=4096, what="a number of cores"), metavar="CORES",
                    help="a container's CPU quota over those cores (0.5, 1.5): the model's cores where it is fewer")
    levels = pr.add_mutually_exclusive_group()
    levels.add_argument("--concurrency", type=listof(count("--concurrency", 1, MODEL_CLIENTS)), help="closed load, e.g. 1,8,32")
    levels.add_argument("--rate", type=listof(positive("--rate", hi=1e7)), help="open load in requests/s, e.g. 50,100")
    pr.add_argument("--cpu-ms", type=positive("--cpu-ms", lo=0.001, hi=MODEL_MS), help="CPU per request (with --io-ms: no calibration)")
    pr.add_argument("--io-ms", type=positive("--io-ms", zero=True, hi=MODEL_MS), help="I/O wait per request (releases the GIL)")
    pr.add_argument("--outside-ms", type=positive("--outside-ms", zero=True, hi=MODEL_MS), default=0.0,
                    help="time outside the server")
    pr.add_argument("--blocking-io", action="store_true", help="the I/O wait holds its process (non-yielding call)")
    pr.add_argument("--cpu-cv2", type=positive("--cpu-cv2", zero=True, hi=100), default=1.0,
                    help="variability of the CPU per request: (stdev/mean)^2, 0 constant, 1 exponential (default)")
    pr.add_argument("--pool", type=count("--pool", 1, 1024), help="database connections per process (default: as many as threads)")
    pr.add_argument("--db-ms", type=positive("--db-ms", zero=True, hi=MODEL_MS), default=0.0,
                    help="time a request holds a database connection (its queries), without an experiment")
    pr.add_argument("--db-cpu-ms", type=positive("--db-cpu-ms", zero=True, hi=MODEL_MS), default=0.0,
                    help="of --db-ms, the database's own CPU")
    pr.add_argument("--db-cores", type=positive("--db-cores", lo=0.01, hi=4096),
                    help="the database's own cores (default: the experiment's layout; without one, it shares the server's)")
    add_format(pr, NAME)
    pr.add_argument("--sim", action="store_true",
                    help="also simulate each load (the server's accept discipline, measured service-time distributions): "
                         "p50 and p99 with the p99's 95%% interval over replications")


def loads(args) -> list[Load]:
    if args.concurrency:
        return [Load("closed", float(c)) for c in args.concurrency]
    return [Load("open", r) for r in args.rate or []]


def print_calibration(out, cal) -> None:
    out.print(f"calibration of {cal.server} on workload {cal.workload} (valid runs at its lowest load), "
              f"{cal.cores:g} core(s):", highlight=False)
    for label, est in (("CPU per request, ms", cal.cpu_ms), ("I/O per request, ms", cal.io_ms),
                       ("outside the server, ms", cal.outside_ms), ("app CPU (Server-Timing), ms", cal.app_cpu_ms),
                       ("GIL/CPU wait, ms", cal.gil_wait_ms), ("other in app, ms", cal.app_other_ms),
                       ("CPU variability (cv^2)", cal.cpu_cv2), ("database (a connection held), ms", cal.db_ms),
                       ("database's CPU, ms", cal.db_cpu_ms), ("pool wait, ms", cal.pool_wait_ms)):
        if est is not None:
            out.print(f"  {label:30} {est}", highlight=False)
    if cal.db_ms:
        where = f"its own {cal.db_cores:g} core(s)" if cal.db_cores else "the server's cores (shared)"
        limit = f", max_connections {cal.db_max_connections}" if cal.db_max_connections else ""
        out.print(f"  {'database on':30} {where}{limit}", highlight=False)
    if cal.memory_per_process_mib is not None:
        out.print(f"  {'memory, MiB':30} {cal.memory_base_mib:.1f} + {cal.memory_per_process_mib:.1f} per process"
                  f" + {cal.memory_per_thread_mib:.2f} per thread", highlight=False)
    if cal.service_fits:
        best = cal.service_fits[0]
        said = (best.text if best.good else f"no shape within {GOOD} of it (closest: {best.text})")
        out.print(f"  {'service time, fitted':30} {said}; the model uses the measured quantiles", highlight=False)


def _ranged(value: float, between: tuple[float, float] | None, digits: int) -> str:
    """ "12.70 (11.2..14.3)": a prediction and the range its calibration allows."""
    if between is None or not all(map(math.isfinite, between)):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} ({between[0]:.{digits - 1 if digits else 0}f}..{between[1]:.{digits - 1 if digits else 0}f})"


def run(args, out) -> int:
    given = Given(args.cpu_ms, args.io_ms, args.outside_ms, args.blocking_io, args.cpu_cv2, args.db_ms, args.db_cpu_ms)
    got = prediction(args.server, args.processes, args.threads, loads(args), store_path=args.store,
                     experiment=args.experiment, workload=args.workload, given=given, cores=args.cores,
                     pool=args.pool, db_cores=args.db_cores, sim=args.sim, quota=args.cpu_limit)
    if args.format == "json":
        print_json(predict_json(got))
        return 0
    if got.calibrated:
        if args.experiment:
            say_store(out, args.store)
        print_calibration(out, got.calibration)
    config, cores, quota = got.config, got.calibration.cores, got.calibration.quota
    simulated_too = any(row.simulated is not None for row in got.rows)  # asked, or under a quota
    threads = "unbounded (event loop)" if config.threads is None else str(config.threads)
    pool = f", pool {config.pool} per process" if got.calibration.db_ms and config.pool is not None else ""
    table = Table(title=f"{args.server}: {config.processes} process(es) x {threads} thread(s){pool}, {cores:g} core(s)"
                        f"{'' if quota is None else f' under a {quota:g}-core quota'}, {config.routing} routing; predicted")
    sims = (("sim req/s", "sim p50 ms", "sim p99 ms (95% CI)", *(("sim throttled ms/s",) if quota is not None else ()))
            if simulated_too else ())
    for col in ("load", "req/s", "mean ms", "p50 ms", "p99 ms", *sims, "CPU", "binds", "measured req/s", "measured p99 ms"):
        table.add_column(col, overflow="fold")
    for row in got.rows:
        pr, sim = row.prediction, row.simulated
        simulated = () if sim is None else (
            f"{sim.prediction.throughput:.1f}", f"{sim.prediction.p50_ms:.2f}",
            "overloaded" if sim.prediction.overloaded else f"{sim.prediction.p99_ms:.2f} ({sim.p99_lo_ms:.1f}..{sim.p99_hi_ms:.1f})",
            *(() if quota is None else ("-" if sim.throttled_ms_per_s is None else f"{sim.throttled_ms_per_s:.0f}",)))
        table.add_row(row.load.label, _ranged(pr.throughput, row.throughput_range, 1), f"{pr.mean_ms:.2f}",
                      f"{pr.p50_ms:.2f}", _ranged(pr.p99_ms, row.p99_range_ms, 2),
                      *simulated, f"{100 * pr.cpu_utilization:.0f}%", escape(pr.binding),
                      "-" if row.measured is None else f"{row.measured:.1f}",
                      "-" if row.measured_p99_ms is None else f"{row.measured_p99_ms:.1f}")
    out.print(table)
    if got.rows and got.rows[0].throughput_range is not None:
        out.print("in brackets: the range the calibration's intervals allow (the model at their ends"
                  + ("; p99 widened by the simulator's spread over its replications" if simulated_too else "") + ")",
                  highlight=False)
    elif got.calibrated:
        out.print("no range: the calibration has one run at its lowest load (no interval)", highlight=False)
    for where in got.extrapolated:
        out.print(f"extrapolated: {where}", highlight=False)
    for row in got.rows:  # a gap a pathology found there explains (the model knows none of them)
        for f in row.explained:
            out.print(f"explained: {f.explains(row.prediction.p99_ms, row.measured_p99_ms)}", highlight=False)
    if simulated_too:
        how = discipline(got.rows[0].simulated.instance, discipline_of(got.calibration).source)
        periods = ("" if quota is None else f"; the quota as CFS enforces it, {quota * got.calibration.period_s * 1000:g} ms "
                   f"of CPU each {got.calibration.period_s * 1000:g} ms period, then every thread waits for the next "
                   "(throttled: the CPUs held back, summed, as cpu.stat counts them)")
        out.print(f"simulated: {how}; {REPLICATIONS} replications of {REQUESTS:,} requests each, the first "
                  f"10% of each left out{periods}", highlight=False)
    return 0
