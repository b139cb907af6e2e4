"""``arena recommend``: the best processes x threads per server under limits (and --verify); ``--json``:
schemas/recommend.schema.json."""


from rich.markup import escape
from rich.table import Table

from arena.app.predict import Load, recommendations, verify
from arena.cli.args import (reap_first, EXIT_FAILED, MODEL_CLIENTS, add_goal, add_limits, add_store, limits_of, say_store,
                            count, goal_flags, listof, positive, add_format, print_json)
from arena.errors import ArenaError
from arena.report.model_json import recommend_json
from arena.report.answer_view import cell_text, figure_text, meets_text, verdict_text, why_lines

NAME = "recommend"


def add(sub) -> None:
    rc = sub.add_parser(NAME, help="the best processes x threads per server under a p99 target and memory budget")
    rc.add_argument("experiment", help="calibrate from this experiment's runs")
    add_store(rc)
    target = rc.add_mutually_exclusive_group(required=True)
    target.add_argument("--concurrency", type=count("--concurrency", 1, MODEL_CLIENTS), help="the load: closed, N clients")
    target.add_argument("--rate", type=positive("--rate", hi=1e7), help="the load: open, requests/s")
    add_goal(rc)
    add_limits(rc)
    rc.add_argument("--workload", help="only this workload of the experiment (default: each)")
    rc.add_argument("--cores", type=positive("--cores", lo=0.01, hi=4096), help="server cores (default: the experiment's)")
    rc.add_argument("--servers", type=listof(str), help="only these servers (default: every server of the experiment)")
    rc.add_argument("--top", type=count("--top", 1, 50), default=3, help="candidates shown (and verified) per server")
    rc.add_argument("--pool", type=listof(count("--pool", 1, 1024)),
                    help="database pool sizes per process to consider, e.g. 2,5 (default: 1 up to the threads)")
    rc.add_argument("--sim", action="store_true",
                    help="predict every candidate by simulation (accept discipline, measured service-time distributions) "
                         "instead of the mean-value model")
    rc.add_argument("--verify", action="store_true", help="run the top candidates on the real servers and compare")
    add_format(rc, NAME)


def run(args, out) -> int:
    load = Load("closed", float(args.concurrency)) if args.concurrency else Load("open", args.rate)
    container = limits_of(args)
    res, recs = recommendations(args.store, args.experiment, load, goal_flags(args), args.cores, args.servers, args.top,
                                args.pool, args.sim, args.workload, container)
    if args.verify and len(recs) > 1:
        raise ArenaError(f"--verify: {res.name} has {len(recs)} workloads; give --workload to verify one")
    if args.format == "json":
        if args.verify:
            raise ArenaError("--format json: not with --verify (its runs print as they go); verify, then arena show its experiment")
        print_json(recommend_json(recs, res.cells))
        found = any(r.measured.best is not None or r.best is not None for r in recs)
        return 0 if found else EXIT_FAILED
    what = f"{int(load.level)} clients" if load.model == "closed" else f"{load.level:g} requests/s"
    found = False
    say_store(out, args.store)
    for rec in recs:
        out.print(f"recommend for {what}" + (f", workload {rec.workload}" if len(recs) > 1 else "")
                  + f"; goal: {rec.goal}" + (f"; under {container.text}" if container.any else ""), highlight=False)
        found = _measured(rec, out) | found
        for line in why_lines(rec.why, rec.measured):  # a finding a line, unbroken
            out.print(line, highlight=False, markup=False, soft_wrap=True)
        top = _predicted(rec, args.sim, out)
        found = found or top is not None
    rec = recs[0]
    top = rec.best
    if not (args.verify and top is not None):
        return 0 if found else EXIT_FAILED

    reap_first(out)
    def progress(e) -> None:
        if e.kind == "run":
            out.print(f"  {e.run.key}: {e.result.measured.achieved_rps:.1f} req/s", highlight=False, markup=False)
        elif e.kind == "failed":
            out.print(f"  {e.run.key}: FAILED: {e.message}", highlight=False, markup=False)

    out.print(f"verifying {sum(len(s.fits) for s in rec.per_server)} configurations on the real servers ...",
              highlight=False)
    checked = verify(res, rec, args.store, progress)
    table = Table(title=f"predicted vs measured (experiment {checked.experiment})")
    for col in ("configuration", "predicted req/s", "measured req/s", "error", "predicted p99 ms", "measured p99 ms", "valid"):
        table.add_column(col)
    for c, cell, err in checked.pairs:
        p99 = cell.p99_us.median
        table.add_row(escape(cell.label), f"{c.predicted.throughput:.1f}",
                      "-" if err is None else f"{cell.throughput.median:.1f}", "-" if err is None else f"{100 * err:+.1f}%",
                      f"{c.predicted.p99_ms:.1f}", "-" if p99 is None else f"{p99 / 1000:.1f}",
                      "yes" if cell.valid == cell.total else escape("; ".join(cell.flags)))
    out.print(table)
    if checked.mape is not None:
        out.print(f"mean absolute error of throughput: {checked.mape:.1f}% over {len(checked.pairs) - len(checked.unmeasured)} "
                  "configurations", highlight=False)
    if checked.unmeasured:
        out.print(f"{len(checked.unmeasured)} configuration(s) without a valid run: not verified (their runs stay in "
                  f"the store as experiment {checked.experiment}; `arena run` cannot repeat them there, so verify again "
                  "with another store or compare with `arena show`)", highlight=False)
        return EXIT_FAILED
    return 0


def _measured(rec, out) -> bool:
    """The configurations the experiment measured at this load within the goal, best first, each
    compared with the best; whether there is one."""
    a = rec.measured
    if a.best is None:
        out.print(f"  measured at this load: none keeps within the goal ({a.goal})" if a.repetitions[1]
                  else "  measured at this load: nothing (the experiment did not run it)", highlight=False)
        return False
    table = Table(title=f"measured at this load within the goal ({a.workload})")
    for col in ("configuration", "req/s", "p99 ms", "memory MiB", "against the best"):
        table.add_column(col, overflow="fold")
    rows = [(a.best.cell, "best")] + [(v.cell, verdict_text(v)) for v in a.others]
    for c, versus in rows:
        pss = c.pss_bytes.median
        table.add_row(escape(c.label), figure_text(c.throughput),
                      "-" if c.p99_us.median is None else f"{c.p99_us.median / 1000:.1f}",
                      "-" if not pss else f"{pss / 2**20:.0f}", escape(versus))
    out.print(table)
    out.print(f"best measured: {cell_text(a.best.cell)}{meets_text(a.best)}; binds: {a.best.binds}"
              + (f"; tied with {', '.join(v.cell.label for v in a.tied)}" if a.tied else ""), highlight=False, markup=False)
    return True


def _predicted(rec, sim: bool, out):
    """The model's best candidates per server (measured or not); the best of them, if any fits."""
    for s in rec.per_server:
        how = "simulated" if sim else "predicted"
        table = Table(title=f"{s.server} ({s.calibration.workload}, {s.cores:g} core(s)): best {how} configurations")
        for col in ("configuration", "req/s", "p50 ms", "p99 ms", "memory MiB", "what binds", "fits"):
            table.add_column(col, overflow="fold")
        for c in s.shown:
            table.add_row(escape(c.name), f"{c.predicted.throughput:.1f}", f"{c.predicted.p50_ms:.1f}",
                          f"{c.predicted.p99_ms:.1f}", "-" if c.memory_mib is None else f"{c.memory_mib:.0f}",
                          escape(c.predicted.binding), "yes" if c.fits else escape(c.why_not))
        out.print(table)
        if not s.fits:
            out.print(f"  {s.server}: no configuration is predicted to meet the goal at this load", highlight=False)
    top = rec.best
    if top is not None:
        out.print(f"best predicted: {top.name}: {top.predicted.throughput:.1f} req/s, p99 {top.predicted.p99_ms:.1f} ms"
                  f"; {top.predicted.binding}", highlight=False)
    return top
