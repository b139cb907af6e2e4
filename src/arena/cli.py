"""The ``arena`` command: arguments -> one call into the engine -> printed result.

Only this module turns an ArenaError into a one-line message and an exit code.
"""

from __future__ import annotations

import argparse
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


def _positive(flag: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be a number above 0, got '{text}'")
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
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


COMMANDS = {"servers": cmd_servers, "serve": cmd_serve, "check": cmd_check, "load": cmd_load, "run": cmd_run,
            "show": cmd_show, "ls": cmd_ls, "export": cmd_export}

if __name__ == "__main__":
    sys.exit(main())
