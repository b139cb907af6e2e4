"""The real servers Arena runs: one declarative entry per server, and the pure functions that turn
an entry, an app and knob values into a command line.

Every entry says how the server is started (a command template), which knobs it has and how each
maps to a flag or a config line, which app interfaces it serves, how it is stopped gracefully, how
its version is found and how to install it. Request logging is off in every entry (it is off by
default in most; a per-request log line would be measured as server cost in some and not others).

Template fields: {host} {port} {target} (the app's module:attr or rackup file) {interface}
{bin} (the Python environment's bin dir) {python} {venv} {workdir} {config} (the generated config
file) and each knob by name: {processes} {threads} {connections}.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Mapping

from arena.errors import ArenaError
from arena.subjects import APPS, App

MODELS = ("process", "thread", "hybrid", "event", "async")
KNOBS = ("processes", "threads", "connections")
# The most a knob may be set to: beyond these a start fails slowly (forks, memory, file descriptors)
# rather than measuring anything; a server entry may lower its own.
KNOB_MAX = {"processes": 256, "threads": 1024, "connections": 100_000}


@dataclass(frozen=True)
class Knob:
    """A concurrency knob. ``default`` None means: not passed, the server's own default applies."""

    default: int | None
    args: tuple[str, ...] = ()  # flags added when the knob is set; () when the template uses it
    env: str | None = None  # the convention variable whose value overrides ``default``
    hi: int | None = None  # the most it may be set to (None: KNOB_MAX of its name)
    interfaces: tuple[str, ...] = ()  # only for these app interfaces; () = all it serves
    args_unless: int | None = None  # at this value the flags are left out (the server's own mode)
    why: str = ""  # where the default comes from


@dataclass(frozen=True)
class Server:
    name: str
    language: str  # "python" | "ruby"
    model: str  # one of MODELS
    interfaces: tuple[str, ...]
    command: tuple[str, ...]
    knobs: Mapping[str, Knob] = field(default_factory=dict)
    config: tuple[str, str] | None = None  # (file name, template) written to the workdir
    env: Mapping[str, str] = field(default_factory=dict)
    stop_signal: signal.Signals = signal.SIGTERM
    grace_s: float = 10.0
    ready_timeout_s: float = 30.0
    ready_floor_s: float = 0.0  # not ready before this long after launch (start-up work it does late)
    version: tuple[str, ...] = ()  # ("dist", name) or ("cmd", regex, *argv)
    install_hint: str = ""
    description: str = ""
    # How requests reach its processes (for arena.model): "shared" when each request is accepted
    # anew from one queue (no keep-alive, or a front process that queues for them), "per-process"
    # when a keep-alive connection stays with the process that accepted it.
    routing: str = "per-process"

    @property
    def apps(self) -> tuple[str, ...]:
        return tuple(a.name for a in APPS.values() if a.interface in self.interfaces)

    def executable(self) -> str:
        return self.command[0]


RUBY_ENV = {"RACK_ENV": "production", "RAILS_ENV": "production"}
APT = "apt-get install -y"
PIP = "make install (the Python servers are dependencies of arena in pyproject.toml)"

WEB_CONCURRENCY = "WEB_CONCURRENCY"
RAILS_MAX_THREADS = "RAILS_MAX_THREADS"


def _gunicorn(worker: str, model: str, args: tuple[str, ...], knobs: dict[str, Knob], description: str) -> Server:
    """The gunicorn entries differ only in the worker class and its one knob."""
    return Server(
        f"gunicorn-{worker}", "python", model, ("wsgi",),
        ("{bin}/gunicorn", "-k", worker, "-b", "{host}:{port}", "-w", "{processes}", *args,
         "--no-control-socket", "{target}"),  # no control socket: parallel instances would share one
        knobs={"processes": Knob(1, env=WEB_CONCURRENCY, why="gunicorn --workers default ($WEB_CONCURRENCY or 1)"),
               **knobs},
        version=("dist", "gunicorn"), install_hint=PIP, description=description,
        routing="shared" if worker == "sync" else "per-process",  # the sync worker has no keep-alive
    )


CATALOG: dict[str, Server] = {
    s.name: s
    for s in (
        # ------------------------------------------------------------------ Ruby
        Server(
            "webrick", "ruby", "thread", ("rack",),
            ("rackup", "-s", "webrick", "-E", "production", "-q", "-o", "{host}", "-p", "{port}", "{target}"),
            env=RUBY_ENV, grace_s=5,
            version=("cmd", r"([\d.]+)", "ruby", "-e", "require 'webrick'; print WEBrick::VERSION"),
            install_hint=f"{APT} ruby-webrick ruby-rack",
            description="Ruby's standard-library server: a thread per connection",
        ),
        Server(
            "thin", "ruby", "event", ("rack",),
            ("thin", "start", "-R", "{target}", "-a", "{host}", "-p", "{port}", "-e", "production",
             "--max-conns", "{connections}"),
            knobs={"connections": Knob(1024, why="thin --max-conns default")},
            env=RUBY_ENV, grace_s=5,  # SIGTERM waits for open connections (up to 30 s): keep it short
            version=("cmd", r"thin ([\d.]+)", "thin", "-v"), install_hint=f"{APT} thin",
            description="EventMachine reactor; the app runs on the reactor thread",
        ),
        Server(
            "thin-threaded", "ruby", "thread", ("rack",),
            ("thin", "start", "-R", "{target}", "-a", "{host}", "-p", "{port}", "-e", "production",
             "--threaded", "--threadpool-size", "{threads}", "--max-conns", "{connections}"),
            knobs={"threads": Knob(20, why="EventMachine threadpool default"),
                   "connections": Knob(1024, why="thin --max-conns default")},
            env=RUBY_ENV, grace_s=5,
            version=("cmd", r"thin ([\d.]+)", "thin", "-v"), install_hint=f"{APT} thin",
            description="thin --threaded: the reactor hands each request to EventMachine's thread pool",
        ),
        Server(
            "unicorn", "ruby", "process", ("rack",),
            ("unicorn", "-c", "{config}", "-E", "production", "{target}"),
            knobs={"processes": Knob(1, env=WEB_CONCURRENCY, why="unicorn worker_processes default")},
            config=("unicorn.conf.rb",
                    "worker_processes {processes}\nlisten '{host}:{port}'\npid '{workdir}/unicorn.pid'\n"
                    "timeout 120\n"),
            env=RUBY_ENV, stop_signal=signal.SIGQUIT,  # unicorn: QUIT is graceful, TERM is immediate
            version=("cmd", r"unicorn v([\d.]+)", "unicorn", "-v"), install_hint=f"{APT} unicorn",
            routing="shared", description="pre-forked single-threaded workers on one shared listen socket",
        ),
        Server(
            # Puma's own rule: no workers = single mode (one process, a thread pool); -w N = clustered
            # (a master forking N workers, each with the pool).
            "puma", "ruby", "hybrid", ("rack",),
            ("puma", "-e", "production", "-b", "tcp://{host}:{port}", "-t", "{threads}:{threads}", "{target}"),
            knobs={"processes": Knob(1, args=("-w", "{processes}"), args_unless=1, env=WEB_CONCURRENCY,
                                     why="single mode unless WEB_CONCURRENCY (Rails' puma.rb)"),
                   "threads": Knob(5, env=RAILS_MAX_THREADS, why="Rails' puma.rb: RAILS_MAX_THREADS or 5")},
            env=RUBY_ENV,
            version=("cmd", r"puma version ([\d.]+)", "puma", "--version"), install_hint=f"{APT} puma",
            description="single mode at 1 process (a thread pool); clustered above (forked workers x threads)",
        ),
        Server(
            "passenger", "ruby", "process", ("rack",),
            ("passenger", "start", "--engine", "builtin", "--address", "{host}", "--port", "{port}",
             "--environment", "production", "--rackup", "{target}",
             "--min-instances", "{processes}", "--max-pool-size", "{processes}",
             # Passenger otherwise calls home: Arena sends nothing off this machine.
             "--disable-security-update-check", "--disable-anonymous-telemetry",
             "--pid-file", "{workdir}/passenger.pid", "--instance-registry-dir", "{workdir}",
             # Passenger echoes its log file to stdout (tail -f): it must not be our server.log.
             "--log-file", "{workdir}/passenger.log"),
            knobs={"processes": Knob(6, why="Passenger's max_pool_size default (fixed: min = max)")},
            # Its core runs a `prespawn` helper (HEAD /) 2 s after it is online; a stop before that
            # helper is answered makes the watchdog wait for its 10 s timeout.
            env=RUBY_ENV, ready_timeout_s=60, ready_floor_s=2.5,
            version=("cmd", r"Passenger\(R\) ([\d.]+)", "passenger", "--version"),
            install_hint=f"{APT} passenger",
            routing="shared", description="Passenger standalone, builtin engine: processes fed by its request queue",
        ),
        # ------------------------------------------------------------------ Python
        Server(
            "wsgiref", "python", "process", ("wsgi",),
            ("{python}", "-m", "arena.servers.wsgiref_main", "--host", "{host}", "--port", "{port}", "{target}"),
            version=("python",), install_hint="part of Python's standard library",
            routing="shared", description="the standard library's WSGI server: one request at a time (a baseline)",
        ),
        _gunicorn("sync", "process", (), {}, "pre-forked single-threaded workers (no keep-alive)"),
        _gunicorn("gthread", "hybrid", ("--threads", "{threads}"),
                  {"threads": Knob(1, why="gunicorn --threads default")},
                  "pre-forked workers, each with a thread pool"),
        _gunicorn("gevent", "async", ("--worker-connections", "{connections}"),
                  {"connections": Knob(1000, why="gunicorn --worker-connections default")},
                  "pre-forked workers running greenlets (gevent monkey-patching)"),
        Server(
            "uvicorn", "python", "async", ("asgi",),
            ("{bin}/uvicorn", "--host", "{host}", "--port", "{port}", "--workers", "{processes}",
             "--no-access-log", "--log-level", "warning", "{target}"),
            knobs={"processes": Knob(1, env=WEB_CONCURRENCY, why="uvicorn --workers default ($WEB_CONCURRENCY or 1)"),
                   "connections": Knob(None, args=("--limit-concurrency", "{connections}"),
                                       why="uvicorn --limit-concurrency: unlimited by default")},
            version=("dist", "uvicorn"), install_hint=PIP,
            description="asyncio event loop (uvloop, httptools) per worker process",
        ),
        Server(
            "hypercorn", "python", "async", ("asgi", "wsgi"),
            ("{bin}/hypercorn", "-b", "{host}:{port}", "-w", "{processes}", "{target}"),
            knobs={"processes": Knob(1, why="hypercorn --workers default")},
            version=("dist", "hypercorn"), install_hint=PIP,
            description="asyncio event loop per worker; WSGI apps run in its thread pool",
        ),
        Server(
            "granian", "python", "hybrid", ("wsgi", "asgi"),
            ("{bin}/granian", "--interface", "{interface}", "--host", "{host}", "--port", "{port}",
             "--workers", "{processes}", "--no-ws", "--log-level", "warning", "{target}"),
            knobs={"processes": Knob(1, why="granian --workers default"),
                   "threads": Knob(None, args=("--blocking-threads", "{threads}"), interfaces=("wsgi",),
                                   why="granian --blocking-threads: WSGI only (ASGI allows 1)")},
            version=("dist", "granian"), install_hint=PIP,
            description="Rust (tokio/hyper) HTTP core; WSGI on blocking threads, ASGI on an event loop",
        ),
        Server(
            "waitress", "python", "thread", ("wsgi",),
            ("{bin}/waitress-serve", "--listen={host}:{port}", "--threads={threads}",
             "--connection-limit={connections}", "{target}"),
            knobs={"threads": Knob(4, why="waitress --threads default"),
                   "connections": Knob(100, why="waitress --connection-limit default")},
            version=("dist", "waitress"), install_hint=PIP,
            description="one process: an asyncore-style I/O thread and a pool of app threads",
        ),
        Server(
            "uwsgi", "python", "hybrid", ("wsgi",),
            # --http11-socket: --http-socket has no keep-alive. --die-on-term: TERM otherwise reloads.
            ("{bin}/uwsgi", "--http11-socket", "{host}:{port}", "--master", "--die-on-term",
             "--need-app", "--disable-logging", "--home", "{venv}", "--module", "{target}",
             "--processes", "{processes}", "--threads", "{threads}"),
            knobs={"processes": Knob(1, why="uwsgi --processes default"),
                   "threads": Knob(1, why="uwsgi --threads default")},
            version=("dist", "uwsgi"), install_hint=PIP,
            description="pre-forked processes (master), each with threads",
        ),
    )
}


# ---------------------------------------------------------------------- lookup and knobs


def get_server(name: str) -> Server:
    try:
        return CATALOG[name]
    except KeyError:
        raise ArenaError(f"server: unknown server '{name}' (servers: {', '.join(CATALOG)})") from None


def knobs_for(server: Server, app: App) -> dict[str, Knob]:
    """The knobs that apply to ``server`` serving ``app`` (some apply to one interface only)."""
    return {k: v for k, v in server.knobs.items() if not v.interfaces or app.interface in v.interfaces}


def resolve_knobs(server: Server, app: App, requested: Mapping[str, int | None],
                  environ: Mapping[str, str], *, strict: bool = True) -> dict[str, int | None]:
    """Requested values, else the convention variable, else the default; checked against bounds.

    With ``strict``, asking for a knob the server does not have is an error; otherwise (``arena
    check`` across many servers) it is dropped.
    """
    knobs = knobs_for(server, app)
    for name, value in requested.items():
        if value is not None and name not in knobs:
            if strict:
                have = ", ".join(knobs) or "none"
                raise ArenaError(f"--{name}: {server.name} serving {app.name} has no {name} knob (its knobs: {have})")
    resolved: dict[str, int | None] = {}
    for name, knob in knobs.items():
        hi = knob.hi or KNOB_MAX[name]
        value, source = requested.get(name), f"--{name}"
        if value is None and knob.env and environ.get(knob.env):
            raw, source = environ[knob.env], knob.env
            if not re.fullmatch(r"[0-9]+", raw.strip()):
                raise ArenaError(f"{knob.env}: must be a whole number from 1 to {hi}, got '{raw}'")
            value = int(raw)
        if value is None:
            value = knob.default
        if value is not None and not (1 <= value <= hi):
            raise ArenaError(f"{source}: must be a whole number from 1 to {hi}, got '{value}'")
        resolved[name] = value
    return resolved


def default_pool(server: Server, knobs: Mapping[str, int | None]) -> int | None:
    """A process's database pool when the configuration sets none: as many connections as threads
    (Rails' convention: the pool follows RAILS_MAX_THREADS); one for a process that serves one request
    at a time; None (the app's own default) for an event loop, which has no thread count to follow."""
    if knobs.get("threads"):
        return knobs["threads"]
    return 1 if server.model in ("process", "event") else None


def check_app(server: Server, app: App) -> None:
    if app.interface not in server.interfaces:
        raise ArenaError(f"--app: {server.name} cannot serve '{app.name}' ({app.interface}); "
                         f"it serves: {', '.join(server.apps)}")


# ---------------------------------------------------------------------- command building


@dataclass(frozen=True)
class Command:
    argv: list[str]
    files: dict[str, str]  # file name in the workdir -> contents
    env: dict[str, str]


def python_bin() -> Path:
    """The bin dir of the Python environment Arena runs in (where the Python servers are)."""
    return Path(sys.executable).parent


def build_command(server: Server, app: App, knobs: Mapping[str, int | None], *, host: str, port: int,
                  workdir: Path, bin_dir: Path | None = None) -> Command:
    """Pure: the argv, config files and environment that start ``server`` serving ``app``."""
    check_app(server, app)
    bin_dir = bin_dir or python_bin()
    fields = {
        "host": host, "port": port, "target": app.target, "interface": app.interface,
        "bin": str(bin_dir), "python": str(bin_dir / "python"), "venv": str(bin_dir.parent),
        "workdir": str(workdir), "config": str(workdir / server.config[0]) if server.config else "",
        **{k: ("" if v is None else v) for k, v in knobs.items()},
    }
    argv = [part.format_map(fields) for part in server.command]
    for name, value in knobs.items():
        if value is not None and value != server.knobs[name].args_unless:
            argv[-1:-1] = [a.format_map(fields) for a in server.knobs[name].args]  # before the target
    files = {server.config[0]: server.config[1].format_map(fields)} if server.config else {}
    return Command(argv, files, dict(server.env))


# ---------------------------------------------------------------------- availability and version


def resolve_executable(server: Server, bin_dir: Path | None = None) -> str | None:
    exe = server.executable().format(bin=bin_dir or python_bin(), python=(bin_dir or python_bin()) / "python")
    return exe if os.path.isabs(exe) and os.access(exe, os.X_OK) else shutil.which(exe)


def available(server: Server) -> bool:
    return resolve_executable(server) is not None and version(server.name) is not None


@lru_cache(maxsize=None)
def version(name: str) -> str | None:
    """The installed version of server ``name``, or None when it is not installed."""
    server = CATALOG[name]
    kind, *rest = server.version
    if kind == "python":
        return ".".join(map(str, sys.version_info[:3]))
    if kind == "dist":
        try:
            return metadata.version(rest[0])
        except metadata.PackageNotFoundError:
            return None
    pattern, *argv = rest
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return m.group(1) if m and out.returncode == 0 else None
