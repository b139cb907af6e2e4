"""The real servers Arena runs: one declarative entry per server, and the pure functions that turn
an entry, an app and knob values into a command line.

Every entry says how the server is started (a command template), which knobs it has and how each
maps to a flag or a config line, which app interfaces it serves, how it is stopped gracefully, how
its version is found and how to install it. Request logging is off in every entry (it is off by
default in most; a per-request log line would be measured as server cost in some and not others).

Template fields: {host} {port} {target} (the app's module:attr or rackup file) {interface}
{bin} (the Python environment's bin dir) {python} {venv} {workdir} {config} (the generated config
file) and each knob by name: {processes} {threads} {connections}.

Besides the knobs, an entry names its settings (:class:`Option`: preload, max requests, keep-alive
timeout, event loop, ...) and each language has common ones (YJIT, the allocator): a configuration
sets them by name, checked here, and each value becomes flags, config-file lines or variables.
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
from pathlib import Path
from typing import Mapping

from arena.errors import ArenaError, did_you_mean
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
class Option:
    """A named server setting and what a value adds to the start: flags (before the app's target),
    lines of the config file, environment variables. ``{value}`` in any of them is the value; a
    ``bool`` option adds ``args``/``config``/``env`` when true and ``args_off`` when false."""

    kind: str  # "bool", "count" or "seconds" (whole numbers: RANGES), "choice"
    args: tuple[str, ...] = ()
    args_off: tuple[str, ...] = ()
    config: str = ""
    env: tuple[tuple[str, str], ...] = ()
    choices: tuple[str, ...] = ()
    unset: tuple[str, ...] = ()  # choices that add nothing (the server's own default: glibc malloc)
    why: str = ""  # what it is and the server's own default

    RANGES = {"count": (1, 10_000_000), "seconds": (0, 86_400)}

    def allowed(self) -> str:
        if self.kind in self.RANGES:
            lo, hi = self.RANGES[self.kind]
            return f"a whole number{' of seconds' if self.kind == 'seconds' else ''} from {lo} to {hi}"
        return "true or false" if self.kind == "bool" else " or ".join(self.choices)

    def check(self, value: object) -> bool | int | str | None:
        """``value`` as this option's type (a string from the command line is read too), or None when
        it is not one."""
        if self.kind == "bool":
            if isinstance(value, str):
                value = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}.get(value.lower())
            return value if isinstance(value, bool) else None
        if self.kind in self.RANGES:
            if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value):
                value = int(value)
            lo, hi = self.RANGES[self.kind]
            ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
            return value if ok else None
        return value if value in self.choices else None


JEMALLOC_PATHS = ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                  "/usr/lib/libjemalloc.so.2")


def jemalloc() -> str | None:
    """Debian's libjemalloc (package libjemalloc2), for LD_PRELOAD; None when it is not installed."""
    return next((p for p in JEMALLOC_PATHS if os.path.exists(p)), None)


# Settings every server of a language has (they act on the interpreter or the C library).
COMMON_OPTIONS: dict[str, dict[str, Option]] = {
    lang: {
        **({"yjit": Option("bool", env=(("RUBY_YJIT_ENABLE", "1"),),
                           why="Ruby's JIT (RUBY_YJIT_ENABLE=1); off by default")} if lang == "ruby" else {}),
        "malloc_arena_max": Option("count", env=(("MALLOC_ARENA_MAX", "{value}"),),
                                   why="glibc malloc's arenas (MALLOC_ARENA_MAX); default 8 per core"),
        "allocator": Option("choice", choices=("glibc", "jemalloc"), unset=("glibc",),
                            env=(("LD_PRELOAD", "{jemalloc}"),),
                            why="jemalloc through LD_PRELOAD (Debian's libjemalloc2); default glibc malloc"),
    }
    for lang in ("ruby", "python")
}


def _keepalive(*args: str, why: str) -> Option:
    return Option("seconds", args=args, why=why)


def _max_requests(*args: str, why: str) -> Option:
    return Option("count", args=args, why=why)


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
    # ("dist", name, *more): the distribution's version (and those it runs with, shown beside it);
    # ("cmd", regex, *argv): from a command's output; ("python",): the interpreter's
    version: tuple[str, ...] = ()
    gem: str | None = None  # a Ruby server's gem: its version in an app's bundle (servers.bundle)
    install_hint: str = ""
    description: str = ""
    # How requests reach its processes (for arena.model): "shared" when each request is accepted
    # anew from one queue (no keep-alive, or a front process that queues for them), "per-process"
    # when a keep-alive connection stays with the process that accepted it.
    routing: str = "per-process"
    # Requests a thread serves in a row on one kept-alive connection while others wait, before it
    # takes a waiting one (for arena.model's simulator): Puma 5.6 reads a connection's next request
    # inline (max_fast_inline, 10, waiting up to 0.2 s for it); 0: every request joins the queue.
    inline_requests: int = 0
    # How a kept-alive connection finds its process (for the simulator): "least-busy" where a worker
    # accepts only with a thread free (Puma's wait_until_not_full), so connections spread evenly;
    # "race" where any worker accepts whenever it wakes (gunicorn's workers, uvicorn's and
    # hypercorn's, each polling the one listening socket). None: not known here; the simulator
    # learns it from a measured load level (model.simulated.learn).
    accept: str | None = None
    # Whether it keeps a client's connection open between requests: not unicorn, gunicorn's sync worker
    # or wsgiref, by design (each answer closes its connection; a proxy in front keeps the clients')
    keep_alive: bool = True
    options: Mapping[str, Option] = field(default_factory=dict)  # its named settings (COMMON_OPTIONS too)
    # Variables it reads for its settings besides its knobs' (a trailing * is a prefix): Arena never
    # passes the caller's (launch.ENV_ALLOWED), and says so when they are set (app.servers).
    reads_env: tuple[str, ...] = ()
    # How it binds a unix socket ({socket}) instead of host:port: (these parts of the command, those
    # parts instead); where the command has no such parts, the first of each is replaced in its
    # config file. None: it cannot.
    unix: tuple[tuple[str, ...], tuple[str, ...]] | None = None

    @property
    def apps(self) -> tuple[str, ...]:
        return tuple(a.name for a in APPS.values() if a.interface in self.interfaces)

    def executable(self) -> str:
        return self.command[0]


RUBY_ENV = {"RACK_ENV": "production", "RAILS_ENV": "production"}
APT = "apt-get install -y"
PIP = "pip install 'arena[python-servers]' (every Python server at once; in a checkout: make install)"
# How to add a server that is not installed, by language (each Ruby server's package is its install_hint).
HOW_TO_ADD = {"python": PIP,
              "ruby": f"{APT} and the server's Debian package (its row says which)"}

WEB_CONCURRENCY = "WEB_CONCURRENCY"
RAILS_MAX_THREADS = "RAILS_MAX_THREADS"


GUNICORN_OPTIONS = {
    "preload": Option("bool", args=("--preload",), why="gunicorn --preload: load the app before forking; off"),
    "max_requests": _max_requests("--max-requests", "{value}", why="gunicorn --max-requests: recycle a worker "
                                                                    "after this many; 0 (never) by default"),
    "worker_timeout": Option("seconds", args=("--timeout", "{value}"),
                             why="gunicorn --timeout: a worker silent this long is killed and restarted; 30 s"),
}


THIN_UNIX = (("-a", "{host}", "-p", "{port}"), ("--socket", "{socket}"))
THIN_TIMEOUT = _keepalive("--timeout", "{value}", why="thin --timeout (an idle connection's life); 30 s")


def _gunicorn(worker: str, model: str, args: tuple[str, ...], knobs: dict[str, Knob], description: str,
              name: str | None = None, dists: tuple[str, ...] = ("gunicorn",),
              interfaces: tuple[str, ...] = ("wsgi",)) -> Server:
    """The gunicorn entries differ in the worker class and its one knob."""
    keepalive = {} if worker == "sync" else {
        "keepalive_timeout": _keepalive("--keep-alive", "{value}", why="gunicorn --keep-alive; 2 s by default")}
    return Server(
        name or f"gunicorn-{worker}", "python", model, interfaces,
        ("{bin}/gunicorn", "-k", worker, "-b", "{host}:{port}", "-w", "{processes}", *args,
         "--no-control-socket", "{target}"),  # no control socket: parallel instances would share one
        knobs={"processes": Knob(1, env=WEB_CONCURRENCY, why="gunicorn --workers default ($WEB_CONCURRENCY or 1)"),
               **knobs},
        version=("dist", *dists), install_hint=PIP, description=description,
        routing="shared" if worker == "sync" else "per-process", keep_alive=worker != "sync",
        accept="race",
        options={**GUNICORN_OPTIONS, **keepalive}, unix=(("{host}:{port}",), ("unix:{socket}",)),
        reads_env=("GUNICORN_CMD_ARGS",),
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
            gem="webrick", install_hint=f"{APT} ruby-webrick ruby-rack",
            description="Ruby's standard-library server: a thread per connection",
        ),
        Server(
            "thin", "ruby", "event", ("rack",),
            ("thin", "start", "-R", "{target}", "-a", "{host}", "-p", "{port}", "-e", "production",
             "--max-conns", "{connections}"),
            knobs={"connections": Knob(1024, why="thin --max-conns default")},
            env=RUBY_ENV, grace_s=5,  # SIGTERM waits for open connections (up to 30 s): keep it short
            options={"keepalive_timeout": THIN_TIMEOUT}, unix=THIN_UNIX,
            version=("cmd", r"thin ([\d.]+)", "thin", "-v"), gem="thin", install_hint=f"{APT} thin",
            description="EventMachine reactor; the app runs on the reactor thread",
        ),
        Server(
            "thin-threaded", "ruby", "thread", ("rack",),
            ("thin", "start", "-R", "{target}", "-a", "{host}", "-p", "{port}", "-e", "production",
             "--threaded", "--threadpool-size", "{threads}", "--max-conns", "{connections}"),
            knobs={"threads": Knob(20, why="EventMachine threadpool default"),
                   "connections": Knob(1024, why="thin --max-conns default")},
            env=RUBY_ENV, grace_s=5, options={"keepalive_timeout": THIN_TIMEOUT}, unix=THIN_UNIX,
            version=("cmd", r"thin ([\d.]+)", "thin", "-v"), gem="thin", install_hint=f"{APT} thin",
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
            options={"preload": Option("bool", config="preload_app true",
                                       why="unicorn preload_app: load the app in the master before forking; off")},
            version=("cmd", r"unicorn v([\d.]+)", "unicorn", "-v"), gem="unicorn", install_hint=f"{APT} unicorn",
            routing="shared", keep_alive=False,
            description="pre-forked single-threaded workers on one shared listen socket",
            unix=(("listen '{host}:{port}'",), ("listen '{socket}'",)),
        ),
        Server(
            # Puma's own rule: no workers = single mode (one process, a thread pool); -w N = clustered
            # (a master forking N workers, each with the pool).
            "puma", "ruby", "hybrid", ("rack",),
            # -C: Arena's config file (the settings' lines), never the app's own config/puma.rb
            ("puma", "-C", "{config}", "-e", "production", "-b", "tcp://{host}:{port}", "-t", "{threads}:{threads}",
             "{target}"),
            config=("puma.rb", "# written by Arena\n"),
            knobs={"processes": Knob(1, args=("-w", "{processes}"), args_unless=1, env=WEB_CONCURRENCY,
                                     why="single mode unless WEB_CONCURRENCY (Rails' puma.rb)"),
                   "threads": Knob(5, env=RAILS_MAX_THREADS, why="Rails' puma.rb: RAILS_MAX_THREADS or 5")},
            env=RUBY_ENV,
            options={"preload": Option("bool", args=("--preload",),
                                       why="puma --preload (preload_app!): load the app before forking "
                                           "(clustered mode only); off"),
                     "keepalive_timeout": Option("seconds", config="persistent_timeout {value}",
                                                 why="puma persistent_timeout: an idle keep-alive connection's "
                                                     "life; 20 s by default")},
            version=("cmd", r"puma version ([\d.]+)", "puma", "--version"), gem="puma", install_hint=f"{APT} puma",
            description="single mode at 1 process (a thread pool); clustered above (forked workers x threads)",
            inline_requests=10, accept="least-busy",
            unix=(("tcp://{host}:{port}",), ("unix://{socket}",)),
            reads_env=("PUMA_*", "MIN_THREADS", "MAX_THREADS"),  # Puma's own defaults read these
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
            options={"preload": Option("bool", args=("--spawn-method", "smart"), args_off=("--spawn-method", "direct"),
                                       why="passenger --spawn-method smart (preloads the app) or direct; smart"),
                     "max_requests": _max_requests("--max-requests", "{value}", why="passenger --max-requests: "
                                                   "recycle a process after this many; 0 (never) by default")},
            version=("cmd", r"Passenger\(R\) ([\d.]+)", "passenger", "--version"),
            gem="passenger", install_hint=f"{APT} passenger",
            routing="shared", description="Passenger standalone, builtin engine: processes fed by its request queue",
        ),
        # ------------------------------------------------------------------ Python
        Server(
            "wsgiref", "python", "process", ("wsgi",),
            ("{python}", "-m", "arena.servers.wsgiref_main", "--host", "{host}", "--port", "{port}", "{target}"),
            version=("python",), install_hint="part of Python's standard library",
            routing="shared", keep_alive=False,
            description="the standard library's WSGI server: one request at a time (a baseline)",
        ),
        Server(
            "bjoern", "python", "event", ("wsgi",),
            ("{python}", "-m", "arena.servers.bjoern_main", "--host", "{host}", "--port", "{port}", "{target}"),
            stop_signal=signal.SIGINT,  # its loop stops on SIGINT; SIGTERM would end it mid-request
            version=("dist", "bjoern"), install_hint=PIP + "; its build needs libev-dev",
            description="libev event loop in C, one process; the WSGI app runs on the loop's thread",
        ),
        _gunicorn("sync", "process", (), {}, "pre-forked single-threaded workers (no keep-alive)"),
        _gunicorn("gthread", "hybrid", ("--threads", "{threads}"),
                  {"threads": Knob(1, why="gunicorn --threads default")},
                  "pre-forked workers, each with a thread pool"),
        _gunicorn("gevent", "async", ("--worker-connections", "{connections}"),
                  {"connections": Knob(1000, why="gunicorn --worker-connections default")},
                  "pre-forked workers running greenlets (gevent monkey-patching)"),
        _gunicorn("uvicorn_worker.UvicornWorker", "async", (), {},
                  "pre-forked workers, each an asyncio event loop (uvicorn's worker class)",
                  name="gunicorn-uvicorn", dists=("gunicorn", "uvicorn-worker", "uvicorn"), interfaces=("asgi",)),
        Server(
            "daphne", "python", "async", ("asgi",),
            ("{bin}/daphne", "-b", "{host}", "-p", "{port}", "-v", "0", "{target}"),  # -v 0: no access log
            version=("dist", "daphne"), install_hint=PIP,
            description="Django Channels' ASGI server: one process, Twisted's reactor",
            unix=(("-b", "{host}", "-p", "{port}"), ("-u", "{socket}")),
        ),
        Server(
            "uvicorn", "python", "async", ("asgi",),
            ("{bin}/uvicorn", "--host", "{host}", "--port", "{port}", "--workers", "{processes}",
             "--no-access-log", "--log-level", "warning", "{target}"),
            knobs={"processes": Knob(1, env=WEB_CONCURRENCY, why="uvicorn --workers default ($WEB_CONCURRENCY or 1)"),
                   "connections": Knob(None, args=("--limit-concurrency", "{connections}"),
                                       why="uvicorn --limit-concurrency: unlimited by default")},
            options={"loop": Option("choice", args=("--loop", "{value}"), choices=("auto", "asyncio", "uvloop"),
                                    why="uvicorn --loop; auto (uvloop when installed)"),
                     "http": Option("choice", args=("--http", "{value}"), choices=("auto", "h11", "httptools"),
                                    why="uvicorn --http; auto (httptools when installed)"),
                     "keepalive_timeout": _keepalive("--timeout-keep-alive", "{value}",
                                                     why="uvicorn --timeout-keep-alive; 5 s by default"),
                     "max_requests": _max_requests("--limit-max-requests", "{value}",
                                                   why="uvicorn --limit-max-requests; unlimited by default")},
            version=("dist", "uvicorn"), install_hint=PIP,
            description="asyncio event loop (uvloop, httptools) per worker process",
            accept="race", reads_env=("UVICORN_*",),
            unix=(("--host", "{host}", "--port", "{port}"), ("--uds", "{socket}")),
        ),
        Server(
            "hypercorn", "python", "async", ("asgi", "wsgi"),
            ("{bin}/hypercorn", "-b", "{host}:{port}", "-w", "{processes}", "{target}"),
            knobs={"processes": Knob(1, why="hypercorn --workers default")},
            options={"keepalive_timeout": _keepalive("--keep-alive", "{value}", why="hypercorn --keep-alive; 5 s by default"),
                     "max_requests": _max_requests("--max-requests", "{value}",
                                                   why="hypercorn --max-requests; unlimited by default")},
            version=("dist", "hypercorn"), install_hint=PIP,
            description="asyncio event loop per worker; WSGI apps run in its thread pool",
            accept="race",
            unix=(("{host}:{port}",), ("unix:{socket}",)),
        ),
        Server(
            "granian", "python", "hybrid", ("wsgi", "asgi"),
            ("{bin}/granian", "--interface", "{interface}", "--host", "{host}", "--port", "{port}",
             "--workers", "{processes}", "--no-ws", "--log-level", "warning", "{target}"),
            knobs={"processes": Knob(1, why="granian --workers default"),
                   "threads": Knob(None, args=("--blocking-threads", "{threads}"), interfaces=("wsgi",),
                                   why="granian --blocking-threads: WSGI only (ASGI allows 1)")},
            options={"runtime_threads": Option("count", args=("--runtime-threads", "{value}"),
                                               why="granian --runtime-threads (Rust I/O threads per worker); 1"),
                     "loop": Option("choice", args=("--loop", "{value}"), choices=("auto", "asyncio", "uvloop"),
                                    why="granian --loop (ASGI); auto")},
            version=("dist", "granian"), install_hint=PIP, reads_env=("GRANIAN_*",),
            description="Rust (tokio/hyper) HTTP core; WSGI on blocking threads, ASGI on an event loop",
            unix=(("--host", "{host}", "--port", "{port}"), ("--uds", "{socket}")),
        ),
        Server(
            "waitress", "python", "thread", ("wsgi",),
            ("{bin}/waitress-serve", "--listen={host}:{port}", "--threads={threads}",
             "--connection-limit={connections}", "{target}"),
            knobs={"threads": Knob(4, why="waitress --threads default"),
                   "connections": Knob(100, why="waitress --connection-limit default")},
            options={"keepalive_timeout": _keepalive("--channel-timeout={value}",
                                                     why="waitress --channel-timeout (an idle connection's life); 120 s")},
            version=("dist", "waitress"), install_hint=PIP,
            description="one process: an asyncore-style I/O thread and a pool of app threads",
            unix=(("--listen={host}:{port}",), ("--unix-socket={socket}",)),
        ),
        Server(
            "uwsgi", "python", "hybrid", ("wsgi",),
            # --http11-socket: --http-socket has no keep-alive. --die-on-term: TERM otherwise reloads.
            ("{bin}/uwsgi", "--http11-socket", "{host}:{port}", "--master", "--die-on-term",
             "--need-app", "--disable-logging", "--home", "{venv}", "--module", "{target}",
             "--processes", "{processes}", "--threads", "{threads}"),
            knobs={"processes": Knob(1, why="uwsgi --processes default"),
                   "threads": Knob(1, why="uwsgi --threads default")},
            options={"preload": Option("bool", args_off=("--lazy-apps",),
                                       why="uwsgi loads the app in the master before forking unless --lazy-apps; on"),
                     "max_requests": _max_requests("--max-requests", "{value}",
                                                   why="uwsgi --max-requests; 0 (never) by default")},
            version=("dist", "uwsgi"), install_hint=PIP, reads_env=("UWSGI_*",),
            description="pre-forked processes (master), each with threads",
            unix=(("{host}:{port}",), ("{socket}",)),
        ),
    )
}


# Widely used servers Arena does not run, and why: each installs from neither Debian's packages nor
# PyPI on this Debian release, or no longer builds or works. Ruby gems come from Debian only.
MISSING: dict[str, str] = {
    "falcon": "Ruby (async fibers): not packaged by Debian; a RubyGems-only install",
    "pitchfork": "Ruby (unicorn's successor with reforking): not packaged by Debian; a RubyGems-only install",
    "iodine": "Ruby (C event loop): not packaged by Debian; a RubyGems-only install",
    "agoo": "Ruby (C server): not packaged by Debian; a RubyGems-only install",
    "rainbows": "Ruby (unicorn with threads/fibers): in Debian 12, but abandoned by its author since 2016",
    "nginx-unit": "Ruby and Python (NGINX Unit): not packaged by Debian 12; only in NGINX's own apt repository",
    "meinheld": "Python (greenlet WSGI): unmaintained since 2020; does not build on Python 3.11",
}


# ---------------------------------------------------------------------- lookup and knobs


def get_server(name: str) -> Server:
    try:
        return CATALOG[name]
    except KeyError:
        raise ArenaError(f"server: unknown server '{name}' ({did_you_mean(name, CATALOG)}servers: {', '.join(CATALOG)})") from None


def knobs_for(server: Server, app: App) -> dict[str, Knob]:
    """The knobs that apply to ``server`` serving ``app`` (some apply to one interface only)."""
    return knobs_for_interface(server, app.interface)


def knobs_for_interface(server: Server, interface: str) -> dict[str, Knob]:
    """The knobs that apply to ``server`` serving an app of ``interface`` (granian's threads: WSGI only)."""
    return {k: v for k, v in server.knobs.items() if not v.interfaces or interface in v.interfaces}


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


def options_for(server: Server) -> dict[str, Option]:
    """Every named setting of ``server``: its own, then its language's (YJIT, the allocator)."""
    return {**server.options, **COMMON_OPTIONS.get(server.language, {})}


def setting_problem(server: Server, name: str, value: object) -> str | None:
    """Why ``name = value`` is not a setting of ``server`` (None when it is)."""
    options = options_for(server)
    if name not in options:
        return f"{server.name} has no setting {name} (its settings: {', '.join(options) or 'none'})"
    if options[name].check(value) is None:
        return f"must be {options[name].allowed()} ({server.name}'s {name})"
    if name == "allocator" and value == "jemalloc" and jemalloc() is None:
        return "libjemalloc is not installed (apt-get install libjemalloc2)"
    return None


def check_settings(server: Server, settings: Mapping[str, object], flag: str = "--set") -> dict[str, bool | int | str]:
    """``settings`` checked against ``server``'s options and typed, in the options' order (so that a
    configuration's name does not depend on the order they were written in)."""
    for name, value in settings.items():
        problem = setting_problem(server, name, value)
        if problem:
            raise ArenaError(f"{flag} {name}={value}: {problem}")
    options = options_for(server)
    return {name: options[name].check(settings[name]) for name in options if name in settings}


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


def _effects(option: Option, value: bool | int | str) -> tuple[list[str], str, dict[str, str]]:
    """What one setting's value adds: (flags, a config line, variables)."""
    fields = {"value": value, "jemalloc": jemalloc() or ""}
    if option.kind == "bool" and not value:
        return [a.format_map(fields) for a in option.args_off], "", {}
    if value in option.unset:
        return [], "", {}
    return ([a.format_map(fields) for a in option.args], option.config.format_map(fields),
            {k: v.format_map(fields) for k, v in option.env})


def python_bin() -> Path:
    """The bin dir of the Python environment Arena runs in (where the Python servers are)."""
    return Path(sys.executable).parent


def build_command(server: Server, app: App, knobs: Mapping[str, int | None], *, host: str, port: int | str,
                  workdir: Path, bin_dir: Path | None = None, settings: Mapping[str, bool | int | str] = {},
                  extra_args: tuple[str, ...] = (), socket: str | None = None) -> Command:
    """Pure: the argv, config files and environment that start ``server`` serving ``app``, with its
    named ``settings`` (checked: check_settings) and raw ``extra_args`` (after every other flag),
    bound to the unix socket ``socket`` instead of host:port where one is given (Server.unix);
    ``port`` may be a shell word (a deployed run.sh's ``$PORT``)."""
    check_app(server, app)
    bin_dir = bin_dir or python_bin()
    command, config = server.command, server.config
    if socket is not None:
        command, config = unix_bound(server)
    fields = {
        "host": host, "port": port, "socket": socket or "", "target": app.target, "interface": app.interface,
        "bin": str(bin_dir), "python": str(bin_dir / "python"), "venv": str(bin_dir.parent),
        "workdir": str(workdir), "config": str(workdir / server.config[0]) if server.config else "",
        **{k: ("" if v is None else v) for k, v in knobs.items()},
    }
    argv = [part.format_map(fields) for part in command]
    flags: list[str] = []
    for name, value in knobs.items():
        if value is not None and value != server.knobs[name].args_unless:
            flags += [a.format_map(fields) for a in server.knobs[name].args]
    options, lines, env = options_for(server), [], dict(server.env)
    for name, value in settings.items():
        args, line, variables = _effects(options[name], value)
        flags += args
        lines += [line] if line else []
        env.update(variables)
    flags += extra_args
    at = len(argv) - 1 if command[-1] == "{target}" else len(argv)  # flags go before a final target
    argv[at:at] = flags
    files = {}
    if config:
        files[config[0]] = config[1].format_map(fields) + "".join(f"{line}\n" for line in lines)
    elif lines:
        raise ArenaError(f"{server.name}: a setting needs a config file and the entry has none")
    return Command(argv, files, env)


def unix_servers() -> tuple[str, ...]:
    """The servers that can listen on a unix socket here (Server.unix)."""
    return tuple(s.name for s in CATALOG.values() if s.unix is not None)


def unix_bound(server: Server) -> tuple[tuple[str, ...], tuple[str, str] | None]:
    """Pure: the command and config templates of ``server`` bound to {socket} (Server.unix)."""
    if server.unix is None:
        raise ArenaError(f"{server.name} cannot listen on a unix socket here (upstream = \"tcp\" serves it)")
    old, new = server.unix
    command = server.command
    for i in range(len(command) - len(old) + 1):
        if command[i:i + len(old)] == old:
            return command[:i] + new + command[i + len(old):], server.config
    if server.config is None or old[0] not in server.config[1]:
        raise AssertionError(f"{server.name}: its unix binding {old} is in neither its command nor its config")
    return command, (server.config[0], server.config[1].replace(old[0], new[0]))


# ---------------------------------------------------------------------- availability and version


def resolve_executable(server: Server, bin_dir: Path | None = None) -> str | None:
    exe = server.executable().format(bin=bin_dir or python_bin(), python=(bin_dir or python_bin()) / "python")
    return exe if os.path.isabs(exe) and os.access(exe, os.X_OK) else shutil.which(exe)


def available(server: Server, bin_dir: Path | None = None) -> bool:
    """Whether ``server`` is installed here (or in the Python environment of ``bin_dir``)."""
    return resolve_executable(server, bin_dir) is not None and version(server.name, bin_dir) is not None


def version(name: str, bin_dir: Path | None = None) -> str | None:
    """The installed version of server ``name``, or None when it is not installed. With ``bin_dir`` (a
    Python environment's bin/, the user's --venv), a Python server's version is that environment's own
    (its metadata, read by its interpreter), not Arena's copy."""
    if bin_dir is not None and CATALOG[name].language == "python":
        return _version_in(name, str(bin_dir))
    return _version(name)


# As another environment's interpreter reads it: the version of each distribution argv[2:] (or of
# the interpreter, for "-"), a line each, where module argv[1] (a launcher run with -m, or "-") can be
# imported.
_READ_VERSION = ("import importlib.metadata as m, importlib.util as u, platform, sys\n"
                 "if sys.argv[1] == '-' or u.find_spec(sys.argv[1]):\n"
                 "    print(*(platform.python_version() if d == '-' else m.version(d) for d in sys.argv[2:]), sep='\\n')")


def _versions(dists: list[str], found: list[str | None]) -> str | None:
    """One version string for a server made of several distributions: the first's, the others beside
    it ("23.0.0 (uvicorn-worker 0.4.0, uvicorn 0.32.0)"); None where any is missing."""
    if not found or any(v is None for v in found) or len(found) != len(dists):
        return None
    more = ", ".join(f"{d} {v}" for d, v in zip(dists[1:], found[1:]))
    return found[0] + (f" ({more})" if more else "")


@lru_cache(maxsize=None)
def _version_in(name: str, bin_dir: str) -> str | None:
    server = CATALOG[name]
    kind, *rest = server.version
    python = Path(bin_dir) / "python"
    # a launcher of Arena's (python -m arena.servers.wsgiref_main) runs there only where arena is installed
    launcher = server.command[2] if server.command[:2] == ("{python}", "-m") else "-"
    dists = rest if kind == "dist" else ["-"]
    argv = [str(python), "-c", _READ_VERSION, launcher, *dists]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return _versions(dists, out.stdout.split()) if out.returncode == 0 else None


@lru_cache(maxsize=None)
def _version(name: str) -> str | None:
    server = CATALOG[name]
    kind, *rest = server.version
    if kind == "python":
        return ".".join(map(str, sys.version_info[:3]))
    if kind == "dist":
        from importlib import metadata  # here: 30 ms that a command reading a store does not spend

        found = []
        for dist in rest:
            try:
                found.append(metadata.version(dist))
            except metadata.PackageNotFoundError:
                found.append(None)
        return _versions(rest, found)
    pattern, *argv = rest
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return m.group(1) if m and out.returncode == 0 else None
