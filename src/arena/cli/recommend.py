"""``arena recommend``: the best processes x threads per server under limits (and --verify)."""

from rich.markup import escape
from rich.table import Table

from arena.app.model import Load, recommendation, verify
from arena.cli.args import reap_first, EXIT_FAILED, MODEL_CLIENTS, add_store, count, listof, positive

NAME = "recommend"


def add(sub) -> None:
    rc = sub.add_parser(NAME, help="the best processes x threads per server under a p99 target and memory budget")
    rc.add_argument("experiment", help="calibrate from this experiment's runs")
    add_store(rc)
    target = rc.add_mutually_exclusive_group(required=True)
    target.add_argument("--concurrency", type=count("--concurrency", 1, MODEL_CLIENTS), help="the load: closed, N clients")
    target.add_argument("--rate", type=positive("--rate", hi=1e7), help="the load: open, requests/s")
    rc.add_argument("--p99-max", type=positive("--p99-max"), metavar="MS", help="p99 target at that load")
    rc.add_argument("--memory-max", type=positive("--memory-max"), metavar="MIB", help="memory budget (PSS)")
    rc.add_argument("--cores", type=positive("--cores", lo=0.01, hi=4096), help="server cores (default: the experiment's)")
    rc.add_argument("--servers", type=listof(str), help="only these servers (default: every server of the experiment)")
    rc.add_argument("--top", type=count("--top", 1, 50), default=3, help="candidates shown (and verified) per server")
    rc.add_argument("--pool", type=listof(count("--pool", 1, 1024)),
                    help="database pool sizes per process to consider, e.g. 2,5 (default: 1 up to the threads)")
    rc.add_argument("--sim", action="store_true",
                    help="predict every candidate by simulation (accept discipline, measured service-time distributions) "
                         "instead of the mean-value model")
    rc.add_argument("--verify", action="store_true", help="run the top candidates on the real servers and compare")


def run(args, out) -> int:
    load = Load("closed", float(args.concurrency)) if args.concurrency else Load("open", args.rate)
    res, rec = recommendation(args.store, args.experiment, load, args.p99_max, args.memory_max, args.cores,
                              args.servers, args.top, args.pool, args.sim)
    limits = ", ".join(x for x in (f"p99 <= {args.p99_max:g} ms" if args.p99_max else "",
                                   f"memory <= {args.memory_max:g} MiB" if args.memory_max else "") if x) or "none"
    what = f"{int(load.level)} clients" if load.model == "closed" else f"{load.level:g} requests/s"
    out.print(f"recommend for {what}; limits: {limits}", highlight=False)
    for s in rec.per_server:
        how = "simulated" if args.sim else "predicted"
        table = Table(title=f"{s.server} ({s.calibration.workload}, {s.cores:g} core(s)): best {how} configurations")
        for col in ("configuration", "req/s", "p50 ms", "p99 ms", "memory MiB", "what binds", "fits"):
            table.add_column(col, overflow="fold")
        for c in s.shown:
            table.add_row(escape(c.name), f"{c.predicted.throughput:.1f}", f"{c.predicted.p50_ms:.1f}",
                          f"{c.predicted.p99_ms:.1f}", "-" if c.memory_mib is None else f"{c.memory_mib:.0f}",
                          escape(c.predicted.binding), "yes" if c.fits else escape(c.why_not))
        out.print(table)
        if not s.fits:
            out.print(f"  {s.server}: no configuration meets the limits at this load", highlight=False)
    top = rec.best
    if top is not None:
        out.print(f"best: {top.name}: {top.predicted.throughput:.1f} req/s predicted, p99 {top.predicted.p99_ms:.1f} ms"
                  f"; {top.predicted.binding}", highlight=False)
    if not (args.verify and top is not None):
        return 0 if top is not None else EXIT_FAILED

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
