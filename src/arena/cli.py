"""The ``arena`` command: arguments -> one call into the engine -> printed result.

Only this module turns an ArenaError into a one-line message and an exit code.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from rich.console import Console
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
                      "yes" if ok else f"no: {s.install_hint}", version or "-")
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
                      str(r.processes or "-"), "; ".join(r.problems)[:400])
        out.print(f"{r.server:17} {r.app:8} {r.status}", highlight=False)

    results = check(args.servers or None, args.apps, processes=args.processes, threads=args.threads,
                    cpus=args.cpus, on_result=row)
    out.print(table)
    failed = sum(r.status == "fail" for r in results)
    skipped = sum(r.status == "skip" for r in results)
    out.print(f"{len(results) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return EXIT_FAILED if failed else 0


COMMANDS = {"servers": cmd_servers, "serve": cmd_serve, "check": cmd_check}

if __name__ == "__main__":
    sys.exit(main())
