"""The ``arena`` command: arguments -> one call into the engine -> printed result.

Only this module turns an ArenaError into a one-line message and an exit code.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import time

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from arena.errors import ArenaError
from arena.servers import catalog
from arena.http_client import port_free
from arena.servers.cgroup import parse_cpu_list, survivors

EXIT_ERROR, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED = 2, 1, 130, 143


class Terminated(BaseException):
    """SIGTERM to Arena: unwinds like Ctrl-C so every started server is stopped on the way out."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _count(flag: str, lo: int = 1, hi: int = 4096):
    def parse(text: str) -> int:
        if not text.isdigit() or not lo <= int(text) <= hi:
            raise argparse.ArgumentTypeError(f"must be a whole number from {lo} to {hi}, got '{text}'")
        return int(text)

    parse.__name__ = flag
    return parse


def _positive(flag: str, zero: bool = False):
    """A finite number above 0 (or from 0 with ``zero``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (value >= 0 if zero else value > 0) or value == math.inf:
            raise argparse.ArgumentTypeError(f"must be a number {'>= 0' if zero else 'above 0'}, got '{text}'")
        return value

    parse.__name__ = flag
    return parse


def _duration(flag: str):
    """``10s``, ``500ms``, ``2m`` or a plain number of seconds -> seconds (experiment files' rule)."""
    from arena.experiment import parse_duration

    def parse(text: str) -> float:
        value = parse_duration(text)
        if value is None or value >= 10**9:
            raise argparse.ArgumentTypeError(f"must be a duration such as 10s, 500ms or 2m, got '{text}'")
        return value

    parse.__name__ = flag
    return parse


def _list(item):
    """A comma-separated list of ``item``s: '1,8,32'."""
    def parse(text: str) -> list:
        return [item(part.strip()) for part in text.split(",") if part.strip()] or [item("")]

    parse.__name__ = getattr(item, "__name__", "list")
    return parse


def _cpus(text: str) -> list[int]:
    try:
        return parse_cpu_list(text)
    except ArenaError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--cpus: ")) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, like every other Arena error
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="arena", description="Measure, explain and predict how Ruby and Python app servers "
                                          "serve a workload.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("servers", help="list the servers Arena knows, their knobs and what is installed")

    s = sub.add_parser("serve", help="run one server in the foreground (Ctrl-C stops everything)")
    s.add_argument("server", help="a server name from `arena servers`")
    _add_knobs(s)
    s.add_argument("--app", help="subject app (default: the first the server serves)")
    s.add_argument("--port", type=_count("--port", 1, 65535), help="port (default: a free one)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")

    lo = sub.add_parser("load", help="drive load at a URL with arena-load and print an ab/wrk-style summary")
    lo.add_argument("url", help="http://host:port/path (loopback unless --allow-remote)")
    lo.add_argument("-c", "--connections", type=_count("--connections", 1, 1_000_000),
                    help="closed model: connections (default 10); open model: the most opened (default 1000)")
    lo.add_argument("-r", "--rate", type=_positive("--rate"), help="open model: arrivals per second")
    lo.add_argument("--arrival", choices=("constant", "poisson"), default="constant", help="open model arrivals")
    lo.add_argument("-d", "--duration", type=_duration("--duration"), help="measured time, e.g. 10s (default 10s)")
    lo.add_argument("-n", "--requests", type=_count("--requests", 1, 10**12), help="measured requests")
    lo.add_argument("--warmup", type=_duration("--warmup"), default=0.0, help="warm-up, kept apart (e.g. 2s)")
    lo.add_argument("--think", type=_duration("--think"), default=0.0, help="closed model: pause between requests")
    lo.add_argument("-t", "--threads", type=_count("--threads", 1, 256), default=1, help="generator threads")
    lo.add_argument("-m", "--method", default="GET")
    lo.add_argument("-H", "--header", action="append", default=[], dest="headers", help="'Name: value' (repeatable)")
    lo.add_argument("--body")
    lo.add_argument("--mix", help="JSON file of weighted requests")
    lo.add_argument("--no-keepalive", action="store_true", help="a new connection per request")
    lo.add_argument("--request-start", action="store_true", help="stamp X-Request-Start at the real send time")
    lo.add_argument("--timeout", type=_duration("--timeout"), default=30.0, help="response timeout (default 30s)")
    lo.add_argument("--connect-timeout", type=_duration("--connect-timeout"), default=5.0)
    lo.add_argument("--seed", type=_count("--seed", 0, 2**63), default=1)
    lo.add_argument("--cpus", type=_cpus, help="CPU list for the generator (keep it apart from the server's)")
    lo.add_argument("--json", help="also write arena-load's JSON result to this file")
    lo.add_argument("--allow-remote", action="store_true", help="allow a target that is not loopback")

    ru = sub.add_parser("run", help="run an experiment file (resumes: finished runs are not repeated)")
    ru.add_argument("experiment", help="experiment file (TOML), e.g. scenarios/quick.toml")
    ru.add_argument("--store", default="arena.db", help="results store (default arena.db)")
    ru.add_argument("--dry-run", action="store_true", help="print the plan and its estimated time, run nothing")

    sh = sub.add_parser("show", help="print an experiment's runs and its comparison table")
    sh.add_argument("experiment", nargs="?", help="experiment name (default: every experiment in the store)")
    sh.add_argument("--store", default="arena.db")
    sh.add_argument("--runs", action="store_true", help="also print every run's ab-style summary")

    ls = sub.add_parser("ls", help="list the experiments in the store")
    ls.add_argument("--store", default="arena.db")

    ex = sub.add_parser("export", help="write an experiment's runs as JSON or CSV (one row per run)")
    ex.add_argument("experiment")
    ex.add_argument("--store", default="arena.db")
    ex.add_argument("--format", choices=("json", "csv"), default="csv")
    ex.add_argument("-o", "--output", help="file (default: standard output)")

    rp = sub.add_parser("report", help="write an experiment's HTML report (one self-contained file)")
    rp.add_argument("experiment", nargs="?", help="experiment name (default: the store's most recent)")
    rp.add_argument("--store", default="arena.db")
    rp.add_argument("-o", "--output", help="HTML file (default: arena-report-EXPERIMENT.html)")
    rp.add_argument("--p99-max", type=_positive("--p99-max"), metavar="MS", help="ranking: p99 limit in ms")
    rp.add_argument("--memory-max", type=_positive("--memory-max"), metavar="MIB", help="ranking: PSS limit in MiB")
    rp.add_argument("--export", metavar="DIR", help="also write each chart's data (CSV) and picture into DIR")
    rp.add_argument("--format", choices=("svg", "png"), default="svg", help="picture format for --export")

    pr = sub.add_parser("predict", help="predict throughput and latency of a configuration (queueing model)")
    pr.add_argument("experiment", nargs="?", help="calibrate from this experiment's runs (else give --cpu-ms, --io-ms)")
    pr.add_argument("--store", default="arena.db")
    pr.add_argument("--server", required=True, help="a server name from `arena servers`")
    pr.add_argument("--workload", help="the experiment's workload to calibrate from (default: its first)")
    pr.add_argument("--processes", type=_count("--processes"))
    pr.add_argument("--threads", type=_count("--threads"))
    pr.add_argument("--cores", type=_positive("--cores"), help="server cores (default: the experiment's, else 1)")
    levels = pr.add_mutually_exclusive_group()
    levels.add_argument("--concurrency", type=_list(_count("--concurrency", 1, 100_000)), help="closed load, e.g. 1,8,32")
    levels.add_argument("--rate", type=_list(_positive("--rate")), help="open load in requests/s, e.g. 50,100")
    pr.add_argument("--cpu-ms", type=_positive("--cpu-ms"), help="CPU per request (with --io-ms: no calibration)")
    pr.add_argument("--io-ms", type=_positive("--io-ms", zero=True), help="I/O wait per request (releases the GIL)")
    pr.add_argument("--outside-ms", type=_positive("--outside-ms", zero=True), default=0.0, help="time outside the server")
    pr.add_argument("--blocking-io", action="store_true", help="the I/O wait holds its process (non-yielding call)")
    pr.add_argument("--cpu-cv2", type=_positive("--cpu-cv2", zero=True), default=1.0,
                    help="variability of the CPU per request: (stdev/mean)^2, 0 constant, 1 exponential (default)")

    rc = sub.add_parser("recommend", help="the best processes x threads per server under a p99 target and memory budget")
    rc.add_argument("experiment", help="calibrate from this experiment's runs")
    rc.add_argument("--store", default="arena.db")
    target = rc.add_mutually_exclusive_group(required=True)
    target.add_argument("--concurrency", type=_count("--concurrency", 1, 100_000), help="the load: closed, N clients")
    target.add_argument("--rate", type=_positive("--rate"), help="the load: open, requests/s")
    rc.add_argument("--p99-max", type=_positive("--p99-max"), metavar="MS", help="p99 target at that load")
    rc.add_argument("--memory-max", type=_positive("--memory-max"), metavar="MIB", help="memory budget (PSS)")
    rc.add_argument("--cores", type=_positive("--cores"), help="server cores (default: the experiment's)")
    rc.add_argument("--servers", type=_list(str), help="only these servers (default: every server of the experiment)")
    rc.add_argument("--top", type=_count("--top", 1, 50), default=3, help="candidates shown (and verified) per server")
    rc.add_argument("--verify", action="store_true", help="run the top candidates on the real servers and compare")

    c = sub.add_parser("check", help="start each server with each app, run the conformance requests, stop")
    c.add_argument("servers", nargs="*", metavar="SERVER", help="servers to check (default: all)")
    c.add_argument("--app", action="append", dest="apps", help="only this app (repeatable)")
    _add_knobs(c)
    return p


def _add_knobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--processes", type=_count("--processes"), help="worker processes")
    p.add_argument("--threads", type=_count("--threads"), help="threads per process")
    p.add_argument("--connections", type=_count("--connections"), help="connection limit (where the server has one)")
    p.add_argument("--cpus", type=_cpus, help="CPU list for the server, e.g. 1 or 0-1 (default: all)")


def main(argv: list[str] | None = None) -> int:
    # Explicitly: a process started as a background job inherits SIGINT *ignored*, and Python then
    # installs no KeyboardInterrupt handler; Ctrl-C must stop Arena (and what it started) anyway.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _on_sigterm)
    args = build_parser().parse_args(argv)
    # Piped output (CI logs, files) gets a wide table instead of rich's 80-column default.
    out = Console() if sys.stdout.isatty() else Console(width=200)
    try:
        return COMMANDS[args.command](args, out)
    except ArenaError as e:
        print(f"arena: error: {e}", file=sys.stderr)  # plain: never wrapped or styled
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("arena: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("arena: terminated", file=sys.stderr)
        return EXIT_TERMINATED


# ---------------------------------------------------------------------- commands


def cmd_servers(args, out: Console) -> int:
    table = Table(title="Servers")
    for col in ("name", "language", "model", "knobs (default)", "apps", "available", "version"):
        table.add_column(col)
    for s in catalog.CATALOG.values():
        knobs = ", ".join(f"{k}={'server default' if v.default is None else v.default}"
                          + (f" (${v.env})" if v.env else "") for k, v in s.knobs.items()) or "none"
        version = catalog.version(s.name)
        ok = catalog.available(s)
        table.add_row(s.name, s.language, s.model, knobs, ", ".join(s.apps),
                      "yes" if ok else escape(f"no: {s.install_hint}"), version or "-")
    out.print(table)
    return 0


def cmd_serve(args, out: Console) -> int:
    from arena.servers.launch import ServerSpec, start

    spec = ServerSpec(args.server, args.app, args.processes, args.threads, args.connections, args.cpus,
                      args.port, args.host)
    running = start(spec)
    with running:
        knobs = ", ".join(f"{k}={'default' if v is None else v}" for k, v in running.knobs.items()) or "no knobs"
        out.print(f"{running.server.name} {running.version or ''} serving [bold]{running.app}[/] at "
                  f"[bold]{running.url}[/] ({knobs}; {len(running.procset.pids())} processes; "
                  f"{running.procset.backend} {running.procset.name}; started in {running.startup_s:.2f} s)",
                  highlight=False)
        out.print(f"log: {running.log_path}   try: curl -si '{running.url}/work?cpu_ms=20&io_ms=30&bytes=1000'",
                  highlight=False)
        out.print("Ctrl-C stops it and everything it started.")
        try:
            while running.alive() or running.procset.pids():
                time.sleep(0.2)
        except KeyboardInterrupt:  # the normal way to end `arena serve`
            out.print("stopping ...")
        else:
            tail = running.log_tail()
            raise ArenaError(f"{running.server.name} exited by itself (code {running.proc.returncode}); "
                             f"last lines of its log:\n{tail}")
    left = survivors(running.procset.name)
    if left or not port_free(running.host, running.port):
        raise ArenaError(f"stop: {running.server.name} left processes {left} or port {running.port} taken")
    out.print(f"stopped {running.server.name}: no process left, port {running.port} free")
    return 0


def cmd_check(args, out: Console) -> int:
    from arena.check import check

    table = Table(title="arena check: conformance of every server and app")
    for col in ("server", "app", "result", "version", "knobs", "start-up", "PSS", "procs", "problems"):
        table.add_column(col, overflow="fold")

    def row(r) -> None:
        mark = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "skip": "[yellow]skip[/]"}[r.status]
        knobs = " ".join(f"{k[0]}={v}" for k, v in r.knobs.items() if v is not None) or "-"
        table.add_row(r.server, r.app, mark, r.version or "-", knobs,
                      f"{r.startup_s:.2f} s" if r.startup_s is not None else "-",
                      f"{r.pss_bytes / 2**20:.1f} MiB" if r.pss_bytes else "-",
                      str(r.processes or "-"), escape("; ".join(r.problems)[:400]))
        out.print(f"{r.server:17} {r.app:8} {r.status}", highlight=False)

    results = check(args.servers or None, args.apps, processes=args.processes, threads=args.threads,
                    cpus=args.cpus, on_result=row)
    out.print(table)
    failed = sum(r.status == "fail" for r in results)
    skipped = sum(r.status == "skip" for r in results)
    out.print(f"{len(results) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return EXIT_FAILED if failed else 0


def cmd_load(args, out: Console) -> int:
    import json

    from arena.drivers import native
    from arena.report.summary import load_summary

    spec = native.LoadSpec(
        url=args.url, connections=args.connections, rate=args.rate, arrival=args.arrival, duration_s=args.duration,
        requests=args.requests, warmup_s=args.warmup, think_ms=args.think * 1000, threads=args.threads,
        method=args.method, headers=args.headers, body=args.body, mix_file=args.mix,
        keep_alive=not args.no_keepalive, request_start=args.request_start, connect_timeout_s=args.connect_timeout,
        timeout_s=args.timeout, seed=args.seed, allow_remote=args.allow_remote)
    result = native.run(spec, cpus=args.cpus)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.raw, f, indent=1)
    print(load_summary(result))
    return EXIT_INTERRUPTED if result.interrupted else 0


def _existing_store(path: str):
    import os

    from arena.store import Store

    if not os.path.exists(path):
        raise ArenaError(f"--store {path}: no such store (run an experiment first: arena run scenarios/quick.toml)")
    return Store(path)


def cmd_run(args, out: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from arena.experiment import estimate_s, load_experiment, plan
    from arena.runner import run_experiment
    from arena.store import Store

    exp = load_experiment(args.experiment)
    out.print(f"experiment {exp.name}: {len(exp.servers)} configurations x {len(exp.workloads)} workloads x "
              f"{len(exp.levels)} levels x {exp.repetitions} repetitions; server CPUs {list(exp.server_cpus)}, "
              f"load CPUs {list(exp.load_cpus)}; about {estimate_s(exp) / 60:.0f} min; store {args.store}",
              highlight=False)
    if args.dry_run:
        for i, g in enumerate(plan(exp), 1):
            out.print(f"start {i}: {escape(g.config.name)} #{g.repetition}: " + ", ".join(escape(r.key.split(' ', 1)[1])
                                                                                      for r in g.runs), highlight=False)
        return 0
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[last]}"))
    with Store(args.store) as store, Progress(*columns, console=out, transient=False) as progress:
        task = progress.add_task("runs", total=None, last="")

        def on_event(e) -> None:
            if e.kind == "live":  # the run in progress, each second: its req/s and p99 in that second
                p99 = f"{e.point.p99_us / 1000:.1f} ms" if e.point.p99_us is not None else "-"
                progress.update(task, last=f"{e.run.key} ({e.point.t + 1:.0f}s): {e.point.completed:.0f} req/s, p99 {p99}")
                return
            progress.update(task, total=e.total, completed=e.index)
            if e.kind == "run":
                m = e.result.measured
                p99 = m.response_time.p("99") if m.response_time else None
                mark = "" if not e.flags else "  INVALID: " + "; ".join(e.flags)
                progress.update(task, last=f"{e.run.key}: {m.achieved_rps:.0f} req/s, p99 {(p99 or 0) / 1000:.1f} ms")
                progress.console.print(f"  {e.run.key}: {m.achieved_rps:8.1f} req/s  p99 {(p99 or 0) / 1000:8.2f} ms{mark}",
                                       highlight=False, markup=False)
            elif e.kind == "failed":
                progress.console.print(f"  {e.run.key}: FAILED to start: {e.message}", highlight=False, markup=False)

        counts = run_experiment(exp, store, on_event)
    out.print(f"{counts['run']} runs done, {counts['skipped']} already in the store, {counts['failed']} failed to start; "
              f"results in {args.store} (arena show {exp.name} --store {args.store})", highlight=False)
    return EXIT_FAILED if counts["failed"] else 0


def cmd_show(args, out: Console) -> int:
    from arena.report.summary import load_summary
    from arena.report.tables import comparison

    with _existing_store(args.store) as store:
        names = [args.experiment] if args.experiment else [e["name"] for e in store.experiments()]
        for name in names:
            runs = store.runs(name)
            if args.runs:
                from arena.drivers.result import from_dict

                for r in runs:
                    out.print(f"\n[bold]{escape(r.run_key)}[/]" + ("" if r.valid else escape(f"  INVALID: {'; '.join(r.json('flags'))}")))
                    out.print(load_summary(from_dict(r.json("load"))), highlight=False, markup=False)
            table = Table(title=f"{name}: medians of valid repetitions, 95% CI in brackets")
            for col in ("configuration", "load", "valid/runs", "req/s", "p50 ms", "p99 ms", "PSS MiB", "problems"):
                table.add_column(col, overflow="fold")
            for row in comparison(runs):
                # intervals of positive quantities are shown truncated at 0 (two repetitions give wide ones)
                ci = lambda v, c, k=1.0: "-" if v is None else f"{v / k:.1f}" + (f" [{max(0.0, c[0]) / k:.1f}, {c[1] / k:.1f}]" if c else "")  # noqa: E731
                table.add_row(escape(row.label), row.level, f"{row.valid}/{row.runs}", ci(row.throughput, row.throughput_ci),
                              "-" if row.p50_us is None else f"{row.p50_us / 1000:.2f}", ci(row.p99_us, row.p99_ci, 1000),
                              "-" if row.pss_bytes is None else f"{row.pss_bytes / 2**20:.0f}", escape("; ".join(row.problems)))
            out.print(table)
    return 0


def cmd_ls(args, out: Console) -> int:
    import datetime

    with _existing_store(args.store) as store:
        table = Table(title=f"experiments in {args.store}")
        for col in ("name", "file", "runs", "valid", "last run"):
            table.add_column(col)
        for e in store.experiments():
            last = datetime.datetime.fromtimestamp(e["last_run"]).isoformat(timespec="seconds") if e["last_run"] else "-"
            table.add_row(escape(e["name"]), escape(e["file"]), str(e["runs"]), str(e["valid"]), last)
        out.print(table)
    return 0


def cmd_export(args, out: Console) -> int:
    import csv
    import io
    import json

    from arena.store import RUN_COLUMNS

    with _existing_store(args.store) as store:
        runs = store.runs(args.experiment)
    if args.format == "json":
        text = json.dumps([{**r.row, **{k: r.json(k) for k in ("flags", "load", "resources", "environment")}} for r in runs],
                          indent=1)
    else:  # one flat row per run: the nested documents stay in the JSON export
        flat = [c for c in RUN_COLUMNS if c not in ("load", "resources", "environment")]
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["experiment", *flat])
        for r in runs:
            w.writerow([args.experiment, *(r.row[c] for c in flat)])
        text = buf.getvalue()
    if args.output:
        _write(args.output, text, "--output")
    else:
        sys.stdout.write(text)
    return 0


def _write(path: str, text: str, flag: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise ArenaError(f"{flag} {path}: cannot write it ({e.strerror})") from None


def cmd_report(args, out: Console) -> int:
    import os
    from pathlib import Path

    from arena.report.html import render

    with _existing_store(args.store) as store:
        experiments = store.experiments()
        if args.experiment is None:
            if not experiments:
                raise ArenaError(f"--store {args.store}: the store has no experiment")
            name = max(experiments, key=lambda e: e["last_run"] or e["created_at"])["name"]
        else:
            name = args.experiment
        runs = store.runs(name)
        definition = store.definition(name)
    if not runs:
        raise ArenaError(f"experiment {name}: no runs in {args.store} yet (arena run it first)")
    page, charts = render(name, definition, runs, p99_max_ms=args.p99_max, memory_max_mib=args.memory_max)
    path = args.output or f"arena-report-{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}.html"
    _write(path, page, "--output")
    out.print(f"report of {name} ({len(runs)} runs, {len(charts)} charts): {os.path.abspath(path)}", highlight=False)
    if args.export:
        from arena.report.export import export

        try:
            files = export(charts, Path(args.export), args.format)
        except OSError as e:
            raise ArenaError(f"--export {args.export}: cannot write there ({e.strerror})") from None
        out.print(f"{len(files)} files (CSV and {args.format.upper()} per chart) in {os.path.abspath(args.export)}",
                  highlight=False)
    return 0


def _calibration(store, name: str, server: str, workload: str | None):
    from arena.model.calibrate import calibrate

    runs = store.runs(name)
    if not any(r.server == server for r in runs):
        servers = sorted({r.server for r in runs})
        raise ArenaError(f"--server {server}: experiment {name} has no runs of it (it has: {', '.join(servers)})")
    if workload is not None and not any(r.workload == workload for r in runs):
        raise ArenaError(f"--workload {workload}: not a workload of {name} "
                         f"(it has: {', '.join(sorted({r.workload for r in runs}))})")
    try:
        return calibrate(runs, server, workload), runs
    except ValueError as e:
        raise ArenaError(f"experiment {name}: cannot calibrate {server}: {e}") from None


def _print_calibration(out: Console, cal) -> None:
    out.print(f"calibration of {cal.server} on workload {cal.workload} (valid runs at its lowest load), "
              f"{cal.cores:g} core(s):", highlight=False)
    for label, est in (("CPU per request, ms", cal.cpu_ms), ("I/O per request, ms", cal.io_ms),
                       ("outside the server, ms", cal.outside_ms), ("app CPU (Server-Timing), ms", cal.app_cpu_ms),
                       ("GIL/CPU wait, ms", cal.gil_wait_ms), ("other in app, ms", cal.app_other_ms),
                       ("CPU variability (cv^2)", cal.cpu_cv2)):
        if est is not None:
            out.print(f"  {label:30} {est}", highlight=False)
    if cal.memory_per_process_mib is not None:
        out.print(f"  {'memory, MiB':30} {cal.memory_base_mib:.1f} + {cal.memory_per_process_mib:.1f} per process"
                  f" + {cal.memory_per_thread_mib:.2f} per thread", highlight=False)


def cmd_predict(args, out: Console) -> int:
    from arena.model.calibrate import Calibration, Estimate, server_config
    from arena.model.verify import measured as measured_throughput
    from arena.model.verify import predict
    from arena.servers import catalog

    catalog.get_server(args.server)  # a one-line error for an unknown name
    measured: dict[tuple[str, float], float] = {}
    if args.experiment:
        if args.cpu_ms is not None or args.io_ms is not None:
            raise ArenaError("--cpu-ms/--io-ms: give them without an experiment (with one, they come from its runs)")
        with _existing_store(args.store) as store:
            cal, runs = _calibration(store, args.experiment, args.server, args.workload)
        _print_calibration(out, cal)
        if args.cores:
            from dataclasses import replace

            cal = replace(cal, cores=args.cores)
        mine = [r for r in runs if r.server == args.server and r.workload == cal.workload and r.valid]
        levels = ([("closed", float(c)) for c in args.concurrency] if args.concurrency else
                  [("open", r) for r in args.rate] if args.rate else sorted({(r.model, r.level) for r in mine}))
        measured = measured_throughput(runs, cal, args.processes, args.threads)
    else:
        if args.cpu_ms is None or args.io_ms is None:
            raise ArenaError("--cpu-ms and --io-ms: both are needed without an experiment to calibrate from")
        if not (args.concurrency or args.rate):
            raise ArenaError("--concurrency or --rate: give the load levels to predict")
        cal = Calibration(args.server, "given", args.cores or 1.0, Estimate(args.cpu_ms, None, 0),
                          Estimate(args.io_ms, None, 0), Estimate(args.outside_ms, None, 0), None, None, None,
                          args.blocking_io, Estimate(args.cpu_cv2, None, 0), None, None, None)
        levels = [("closed", float(c)) for c in args.concurrency] if args.concurrency else [("open", r) for r in args.rate]
    config = server_config(args.server, args.processes, args.threads, cal.cores)
    threads = "unbounded (event loop)" if config.threads is None else str(config.threads)
    table = Table(title=f"{args.server}: {config.processes} process(es) x {threads} thread(s), {cal.cores:g} core(s), "
                        f"{config.routing} routing; predicted")
    for col in ("load", "req/s", "mean ms", "p50 ms", "p99 ms", "CPU", "binds", "measured req/s"):
        table.add_column(col, overflow="fold")
    for model, level in levels:
        pr = predict(cal, args.processes, args.threads, model, level)
        m = measured.get((model, level))
        table.add_row(f"c={int(level)}" if model == "closed" else f"{level:g} req/s", f"{pr.throughput:.1f}",
                      f"{pr.mean_ms:.2f}", f"{pr.p50_ms:.2f}", f"{pr.p99_ms:.2f}", f"{100 * pr.cpu_utilization:.0f}%",
                      escape(pr.binding), "-" if m is None else f"{m:.1f}")
    out.print(table)
    return 0


def cmd_recommend(args, out: Console) -> int:
    from arena.model.recommend import candidates

    model, level = ("closed", float(args.concurrency)) if args.concurrency else ("open", args.rate)
    load = f"{int(level)} clients" if model == "closed" else f"{level:g} requests/s"
    with _existing_store(args.store) as store:
        runs = store.runs(args.experiment)
        definition = store.definition(args.experiment)
        servers = args.servers or list(dict.fromkeys(r.server for r in runs))
        cals = {s: _calibration(store, args.experiment, s, None)[0] for s in servers}
    limits = ", ".join(x for x in (f"p99 <= {args.p99_max:g} ms" if args.p99_max else "",
                                   f"memory <= {args.memory_max:g} MiB" if args.memory_max else "") if x) or "none"
    out.print(f"recommend for {load}; limits: {limits}", highlight=False)
    best_overall = []
    chosen: dict[str, list] = {}
    for server, cal in cals.items():
        if args.memory_max and cal.memory_per_process_mib is None:
            raise ArenaError(f"--memory-max: {server} has no memory figures in {args.experiment}")
        ranked = candidates(cal, model, level, args.p99_max, args.memory_max, args.cores)
        fits = [c for c in ranked if c.fits]
        table = Table(title=f"{server} ({cal.workload}, {args.cores or cal.cores:g} core(s)): best predicted configurations")
        for col in ("configuration", "req/s", "p50 ms", "p99 ms", "memory MiB", "what binds", "fits"):
            table.add_column(col, overflow="fold")
        for c in (fits or ranked)[:args.top]:
            table.add_row(escape(c.name), f"{c.predicted.throughput:.1f}", f"{c.predicted.p50_ms:.1f}",
                          f"{c.predicted.p99_ms:.1f}", "-" if c.memory_mib is None else f"{c.memory_mib:.0f}",
                          escape(c.predicted.binding), "yes" if c.fits else escape(c.why_not))
        out.print(table)
        if fits:
            best_overall.append(fits[0])
            chosen[server] = fits[:args.top]
        else:
            out.print(f"  {server}: no configuration meets the limits at this load", highlight=False)
    if best_overall:
        top = max(best_overall, key=lambda c: c.predicted.throughput)
        out.print(f"best: {top.name}: {top.predicted.throughput:.1f} req/s predicted, p99 {top.predicted.p99_ms:.1f} ms"
                  f"; {top.predicted.binding}", highlight=False)
    if args.verify and chosen:
        return _verify(args, out, definition, runs, chosen, model, level)
    return 0 if best_overall else EXIT_FAILED


def _verify(args, out: Console, definition: dict, runs, chosen: dict, model: str, level: float) -> int:
    """Run the chosen candidates on the real servers (one experiment, stored), print predicted vs measured."""
    import hashlib
    import json

    from arena.experiment import parse_experiment
    from arena.model.recommend import verified
    from arena.runner import run_experiment
    from arena.store import Store

    apps = {r.server: r.app for r in runs}
    servers = [{"server": c.server, "app": apps[c.server], "processes": c.processes,
                **({"threads": c.threads} if c.threads else {})} for cs in chosen.values() for c in cs]
    load = {"model": model, "concurrency" if model == "closed" else "rates": [int(level) if model == "closed" else level]}
    data = {k: v for k, v in definition.items() if k not in ("servers", "load", "name", "description", "repetitions")}
    digest = hashlib.sha1(json.dumps([servers, load], sort_keys=True).encode()).hexdigest()[:8]
    data.update(name=f"{definition['name']}-verify-{digest}"[:64], servers=servers, load=load, repetitions=1,
                description=f"arena recommend --verify of {definition['name']}")
    exp = parse_experiment(data, f"(arena recommend --verify {definition['name']})")
    out.print(f"verifying {len(servers)} configurations on the real servers as experiment {exp.name} ...", highlight=False)
    def progress(e) -> None:
        if e.kind == "run":
            out.print(f"  {e.run.key}: {e.result.measured.achieved_rps:.1f} req/s", highlight=False, markup=False)
        elif e.kind == "failed":
            out.print(f"  {e.run.key}: FAILED to start: {e.message}", highlight=False, markup=False)

    with Store(args.store) as store:
        run_experiment(exp, store, progress)
        done = store.runs(exp.name)
    table = Table(title="predicted vs measured")
    for col in ("configuration", "predicted req/s", "measured req/s", "error", "predicted p99 ms", "measured p99 ms", "valid"):
        table.add_column(col)
    pairs = verified([c for cs in chosen.values() for c in cs], done)
    for c, r, err in pairs:
        table.add_row(escape(c.name), f"{c.predicted.throughput:.1f}", f"{r.throughput:.1f}", f"{100 * err:+.1f}%",
                      f"{c.predicted.p99_ms:.1f}", "-" if r.p99_us is None else f"{r.p99_us / 1000:.1f}",
                      "yes" if r.valid else escape("; ".join(r.json("flags"))))
    out.print(table)
    if pairs:
        mean = 100 * sum(abs(err) for _, _, err in pairs) / len(pairs)
        out.print(f"mean absolute error of throughput: {mean:.1f}% over {len(pairs)} runs", highlight=False)
    return 0


COMMANDS = {"servers": cmd_servers, "serve": cmd_serve, "check": cmd_check, "load": cmd_load, "run": cmd_run,
            "show": cmd_show, "ls": cmd_ls, "export": cmd_export, "report": cmd_report,
            "predict": cmd_predict, "recommend": cmd_recommend}

if __name__ == "__main__":
    sys.exit(main())
