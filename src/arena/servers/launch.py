"""The lifecycle of one real server: start it confined, wait until it is ready, stop it completely.

``start()`` returns a :class:`RunningServer` (a context manager). Stopping sends the entry's
graceful signal, waits up to its grace period for the whole process set to exit, then kills
whatever is left in the set and removes the group. Servers still running when Arena exits (an
exception, SIGINT, SIGTERM) are stopped by the same path: see :func:`stop_all`.
"""

from __future__ import annotations

import atexit
import http.client
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from arena.errors import ArenaError, FailedStart, forking, stop_if_asked
from arena.http_client import Client, check_host, free_port, port_free
from arena.limits import Limits, memory_text
from arena.servers import catalog
from arena.servers.bundle import Bundle, bundle_of
from arena.servers.cgroup import PREFIX, ProcessSet, create, reap_stale, stale, survivors, zombie_children
from arena.subjects import App, get_app
from arena.subjects.user import WRAP_DIR

# What a server gets of Arena's own environment: these and LC_*, nothing else, so the caller's
# GUNICORN_CMD_ARGS, RUBYOPT, UVICORN_*, WEB_CONCURRENCY, LD_PRELOAD or PYTHONPATH never change a
# measurement silently. The rest of its environment is what Arena sets and the configuration declares.
ENV_ALLOWED = ("PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME")
# Set by Arena for every start: a configuration does not declare them.
ENV_OWN = ("HOME", "TMPDIR", "PYTHONUNBUFFERED")


def env_problem(name: str, value: object) -> str | None:
    """Why a configuration may not declare ``name=value`` for its server (None when it may)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
        return "a variable's name is letters, digits and '_', not starting with a digit"
    if name.startswith("ARENA_") and name != "ARENA_POOL" or name in ENV_OWN:
        return f"{name} is set by Arena for every server"
    if not isinstance(value, str):
        return "a variable's value is a string (quote numbers: \"1\")"
    if "\x00" in value:
        return "a variable's value cannot hold a NUL character (the environment ends a value there)"
    return None


@dataclass
class ServerSpec:
    """What to start: a server, an app, knob values (None = the entry's default), placement."""

    server: str
    app: str | App | None = None  # a built-in app's name, or an App (a user's: subjects.user)
    processes: int | None = None
    threads: int | None = None
    connections: int | None = None
    cpus: list[int] | None = None
    port: int | None = None
    host: str = "127.0.0.1"
    strict_knobs: bool = True
    env: dict[str, str] = field(default_factory=dict)  # added to its environment: declared, the services' addresses
    settings: dict[str, object] = field(default_factory=dict)  # named settings (catalog.Option): preload, yjit, ...
    options: tuple[str, ...] = ()  # raw flags, after every other flag
    unix: bool = False  # listen on a unix socket in its temp dir instead of a port (behind a proxy or balancer)
    limits: Limits = Limits()  # a container's CPU quota and memory limit on its process set

    def requested_knobs(self) -> dict[str, int | None]:
        return {"processes": self.processes, "threads": self.threads, "connections": self.connections}


class Confined:
    """Something Arena started in its own process set (a server, a service): a context manager that
    stops it once, whatever interrupts the stop (signals held), and forgets it. A subclass has
    ``proc``, ``procset``, ``workdir`` and ``stopped``, and says how it is asked to stop."""

    def stop_how(self) -> tuple[int, float]:
        """(the graceful signal, the grace period in seconds)."""
        raise NotImplementedError

    def after_stop(self) -> None:
        """What else a stop undoes (a port to wait for)."""

    def stop(self, keep_workdir: bool = False) -> None:
        """Graceful signal, wait the grace period, kill what is left, remove the group and (unless
        ``keep_workdir``, for a failed start's log) the work dir. Idempotent."""
        if self.stopped:
            return
        with _signals_held():
            try:
                self.killed = stop_confined(self.proc, self.procset, *self.stop_how())
            finally:
                self.stopped = True
                _live.discard(self)
                self.after_stop()
                if not keep_workdir:
                    shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    __hash__ = object.__hash__


@dataclass(eq=False)
class RunningServer(Confined):
    spec: ServerSpec
    server: catalog.Server
    app: str
    knobs: dict[str, int | None]
    host: str
    port: int
    argv: list[str]
    proc: subprocess.Popen
    procset: ProcessSet
    workdir: Path
    log_path: Path
    version: str | None
    started_at: float
    env: dict[str, str] = field(default_factory=dict)  # what it was started with (its group's variables aside)
    cwd: str = ""
    settings: dict[str, object] = field(default_factory=dict)
    health: str = "/"  # the app's health path
    socket: str | None = None  # the unix socket it listens on (then ``port`` is 0)
    version_from: str | None = None  # where ``version`` comes from when not Arena's own: a --venv, a Gemfile.lock
    startup_s: float = 0.0
    stopped: bool = False
    killed: list[int] = field(default_factory=list)  # pids that needed SIGKILL at stop
    limits: Limits = Limits()  # the container's limits its cgroup holds, read back once set (as stored)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def described(self) -> dict:
        """How it was started, as stored with each run: command line, working directory, environment,
        named settings, the server's version (and where it comes from, when not Arena's own), its
        concurrency model and the knobs it was given (None: its own default)."""
        return {"argv": self.argv, "cwd": self.cwd, "env": self.env, "settings": self.settings,
                "version": self.version, "language": self.server.language, "model": self.server.model,
                "knobs": dict(self.knobs), **({"version_from": self.version_from} if self.version_from else {}),
                **({"limits": asdict(self.limits)} if self.limits.any else {}),
                **({} if self.server.keep_alive else {"keep_alive": False})}

    def log_tail(self, lines: int = 15) -> str:
        return log_tail(self.log_path, lines)

    def stop_how(self) -> tuple[int, float]:
        return self.server.stop_signal, self.server.grace_s

    def after_stop(self) -> None:
        if self.socket is None:
            _wait_port_free(self.host, self.port, timeout=5)


def stop_confined(proc: subprocess.Popen, procset: ProcessSet, sig: int, grace_s: float) -> list[int]:
    """Stop a confined process and everything it spawned: ``sig`` to its main process (when that
    still lives: with it dead nobody can conduct a graceful shutdown), up to ``grace_s`` for the
    set to empty, then SIGKILL to what is left, and the group removed. Returns the pids killed."""
    graceful = proc.poll() is None
    if graceful:
        proc.send_signal(sig)
    deadline = time.monotonic() + (grace_s if graceful else 0)
    while time.monotonic() < deadline:
        proc.poll()  # reap our direct child so it leaves the set
        if not procset.pids():
            break
        time.sleep(0.02)
    killed = procset.pids()
    procset.kill_all()
    proc.wait(timeout=10)
    procset.remove()
    return killed


_live: set = set()  # running servers and services: anything with stop()


def stop_all() -> None:
    """Stop every server and service this process started and has not stopped (atexit, the CLI's
    way out). Servers first: they may be using a service."""
    for thing in sorted(_live, key=lambda t: not isinstance(t, RunningServer)):
        thing.stop()


atexit.register(stop_all)


@contextlib.contextmanager
def _signals_held():
    """Hold SIGINT/SIGTERM while cleaning up; they are delivered (and raise) right after."""
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


HELD = (signal.SIGINT, signal.SIGTERM)


def spawn(argv: list[str], setup: Callable[[], None], **popen) -> subprocess.Popen:
    """Popen ``argv`` in a session of its own, ``setup`` run in the child before exec (joining its
    set), with SIGINT and SIGTERM held across the fork: a Ctrl-C to Arena's process group reaches
    Arena once the child is known, and not the child's Python code between fork and exec (where it
    would print an ignored KeyboardInterrupt); a signal the child caught before its own session
    ends it, by default, before exec."""
    def child() -> None:
        setup()
        for sig in HELD:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)

    with _signals_held(), forking():
        proc = subprocess.Popen(argv, preexec_fn=child, start_new_session=True, **popen)
    stop_if_asked()  # a signal taken by another thread during the fork: its set reaps the child
    return proc


def check_port(host: str, port: int | None) -> None:
    """Refuse a port asked for that something else holds (None: a free one will be taken)."""
    if port is not None and not port_free(host, port):
        raise ArenaError(f"--port: {host}:{port} is in use, choose another or leave it out")


def _wait_port_free(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not port_free(host, port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# Lines that carry a failure's message, best first: Python's "FooError: message", Ruby's
# "message (FooError)", then generic markers.
ERROR_LINES = (re.compile(r"^\s*[\w.]*(Error|Exception): "), re.compile(r"\((\w+::)*\w*(Error|Exception)\)"),
               re.compile(r"FATAL|error:|unable to|failed", re.IGNORECASE))


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` of a server log, preceded by the first line that carries an error message
    when that is earlier (a crash-looping server's tail is often only a backtrace)."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536).decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    tail = log_text(path, 8192).splitlines()[-lines:]
    first = next((line for pattern in ERROR_LINES for line in head if pattern.search(line)), None)
    if first is not None and first not in tail:
        tail = [first, "..."] + tail
    return "\n".join(tail)


# A failure's own line: Python's last "FooError: message" (the exception a traceback ends in, not
# indented), or Ruby's "file:line:in `x': message (FooError)".
PYTHON_RAISED = re.compile(r"^(?:\[[^]]*\] )*([A-Za-z_][\w.]*(?:Error|Exception|Exit)(?:: .*)?)$")
RUBY_RAISED = re.compile(r"^.*?:\d+:in [`'][^']*': (.+) \(([\w:]+)\)$")
# Rails' log of an exception a request ended in: "F, [...] FATAL -- : [request id] Type (message):"
# (the closing "):" on the next line where the message ends in a newline)
RAILS_RAISED = re.compile(r"^.*?(?:\[[^]]*\] )+((?:[A-Z]\w*::)+[A-Z]\w*|[A-Z]\w*(?:Error|Exception)) \((.+?)(?:\):)?\s*$")


def raised(text: str) -> str | None:
    """The exception a log ends in, as "Type: message" on one line: the last such line of ``text``
    (a traceback's last frame; a chained one's final exception), else its first generic error line."""
    found = None
    for line in text.splitlines():
        if m := PYTHON_RAISED.match(line.rstrip()):
            found = m.group(1)
        elif m := RUBY_RAISED.match(line.rstrip()):
            found = f"{m.group(2)}: {m.group(1)}"
        elif m := RAILS_RAISED.match(line.rstrip()):
            found = f"{m.group(1)}: {m.group(2)}"
    if found is None:
        found = next((line.strip() for line in text.splitlines() if ERROR_LINES[2].search(line)), None)
    return found[:300] if found else None


def log_text(path: Path, size: int = 65536) -> str:
    """The last ``size`` bytes of a log, as text ("" where it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def server_env(server: catalog.Server, workdir: Path, extra: dict[str, str]) -> dict[str, str]:
    """A server's environment: the allowed part of Arena's own (ENV_ALLOWED, LC_*), its home and temp
    dir in its work dir, and ``extra`` (the entry's, the services' addresses, the app's)."""
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWED or k.startswith("LC_")}
    env.update(HOME=str(workdir / "home"), TMPDIR=str(workdir / "tmp"), ARENA_SERVER=server.name,
               PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def user_app_launch(app: App, workdir: Path, bundle: Bundle | None) -> tuple[App, dict[str, str], list[str]]:
    """What a user's app adds to a start: the app with its target (a Rack app: the config.ru Arena
    writes in ``workdir``, its timing first), its environment and the command's prefix (``bundle
    exec`` for a Rack app with its own bundle)."""
    user = app.user
    if user is None:
        return app, {}, []
    if app.interface == "rack":
        rackup = workdir / "arena.ru"
        rackup.write_text(user.rackup())
        # Rails logs to log/production.log unless told: to the server's log instead, which Arena keeps
        # and reads for the exception a failed start ends in (other Rack apps ignore it)
        env = {**(bundle.env() if bundle else {}), "RAILS_LOG_TO_STDOUT": "1"}
        return replace(app, target=str(rackup)), env, ["bundle", "exec"] if bundle else []
    env = {"ARENA_USER_APP": user.source, "ARENA_USER_DIR": user.chdir, "ARENA_USER_INTERFACE": app.interface,
           "PYTHONPATH": os.pathsep.join((str(WRAP_DIR), user.chdir))}
    return app, env, []


# Imports the user's target as the wrapper will (arena_wrap._load: its module, its attribute, a
# factory called, callable), and binds nothing: ARENA_USER_INTERFACE is not set.
_IMPORT_CHECK = "import arena_wrap; arena_wrap._load()"
_imported: set[tuple[str, str, str]] = set()  # (interpreter, target, directory) checked in this process


def check_imports(app: App, python: str, env: dict[str, str], timeout: float) -> None:
    """Before a server is given a user's WSGI/ASGI app: its target imports and is callable, in the
    interpreter and environment the server will have (once per target in this process). One line
    naming the target, its directory and the exception otherwise."""
    user = app.user
    key = (python, user.source, user.chdir)
    if key in _imported:
        return
    env = {k: v for k, v in env.items() if k != "ARENA_USER_INTERFACE"}  # import it, bind nothing
    try:
        out = subprocess.run([python, "-c", _IMPORT_CHECK], cwd=user.chdir, env=env, capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ArenaError(f"--app {user.source}: importing it from {user.chdir} took over {timeout:.0f} s") from None
    except OSError as e:
        raise ArenaError(f"--app {user.source}: {python} cannot run ({e.strerror})") from None
    if out.returncode != 0:
        why = raised(out.stderr) or f"exit {out.returncode}"
        raise FailedStart(f"--app {user.source}: does not import from {user.chdir}: "
                          f"{why.removeprefix('RuntimeError: ARENA_USER_APP: ')}",
                          "\n".join(out.stderr.splitlines()[-15:]))
    _imported.add(key)


def app_bundle(app: App | str) -> Bundle | None:
    """The bundle a Rack app of the user's runs with (servers.bundle), or None."""
    user = app.user if isinstance(app, App) else None
    return bundle_of(user.chdir) if user is not None and app.interface == "rack" else None


def server_version(server: catalog.Server, app: App | str, bundle: Bundle | None = None) -> tuple[str | None, str | None]:
    """The version of ``server`` as it runs ``app``, and where it comes from when that is not Arena's
    own installation: the app's bundle (its Gemfile.lock) or the app's --venv (that environment's
    metadata)."""
    user = app.user if isinstance(app, App) else None
    if bundle is not None:
        return bundle.version(server.gem or server.name), str(bundle.lock)
    if user is not None and user.venv is not None:
        return catalog.version(server.name, user.bin_dir), user.venv
    return catalog.version(server.name), None


def known_version(server: catalog.Server, app: App | str) -> tuple[str | None, str | None]:
    """server_version where it can be told (with the app's bundle); (None, None) where it cannot (a
    bundle that is not ready: the start fails and says why)."""
    try:
        return server_version(server, app, app_bundle(app))
    except ArenaError:
        return None, None


KEEP_MARK = "KEPT-FOR-ITS-LOG"  # in a failed start's workdir: stale reaping leaves it alone


def start(spec: ServerSpec, *, ready_timeout: float | None = None, backend: str | None = None) -> RunningServer:
    """Start ``spec`` confined in its own process set and return it once it is ready."""
    server = catalog.get_server(spec.server)
    app = spec.app if isinstance(spec.app, App) else get_app(spec.app or server.apps[0])
    catalog.check_app(server, app)
    # the convention variables (WEB_CONCURRENCY) count where the configuration declares them, not from Arena's own
    knobs = catalog.resolve_knobs(server, app, spec.requested_knobs(), spec.env, strict=spec.strict_knobs)
    settings = catalog.check_settings(server, spec.settings)
    venv_bin = app.user.bin_dir if app.user else None
    if catalog.resolve_executable(server, venv_bin) is None:
        if venv_bin is not None:
            exe = server.executable().format(bin=venv_bin, python=venv_bin / "python")
            raise ArenaError(f"--venv: {venv_bin.parent} has no {server.name} ({exe} is missing; install it there)")
        raise ArenaError(f"server: {server.name} is not installed ({server.install_hint})")
    bundle = app_bundle(app)
    version, version_from = server_version(server, app, bundle)
    reap_before_start()  # first: a dead Arena's orphan may hold the port asked for
    check_host(spec.host)
    if spec.unix:
        catalog.unix_bound(server)  # refused before anything starts when it cannot
    else:
        check_port(spec.host, spec.port)
    port = 0 if spec.unix else spec.port or free_port(spec.host)
    env = dict(spec.env)
    pool = catalog.default_pool(server, knobs)
    if "PGHOST" in env and "ARENA_POOL" not in env and pool is not None:
        env["ARENA_POOL"] = str(pool)

    procset = create(server.name, spec.cpus, backend)
    workdir = Path(tempfile.mkdtemp(prefix=f"{procset.name}-"))  # named after its set: see reap_stale_workdirs
    try:
        applied = procset.limit(spec.limits)  # before anything joins it
        if spec.limits.cpu is not None and (stat := procset.cpu_stat()) is not None:
            env["ARENA_CPU_STAT"] = str(stat)  # the timing reads the quota's throttling around each request
        (workdir / "home").mkdir()
        (workdir / "tmp").mkdir()
        served, app_env, prefix = user_app_launch(app, workdir, bundle)
        if app.user and app.interface != "rack":
            python = str((venv_bin or catalog.python_bin()) / "python")
            check_imports(app, python, server_env(server, workdir, {**app_env, **env}),
                          ready_timeout or app.user.ready_timeout_s or server.ready_timeout_s)
        socket = str(workdir / "server.sock") if spec.unix else None
        cmd = catalog.build_command(server, served, knobs, host=spec.host, port=port, workdir=workdir, bin_dir=venv_bin,
                                    settings=settings, extra_args=tuple(spec.options), socket=socket)
        for name, text in cmd.files.items():
            (workdir / name).write_text(text)
        argv = prefix + cmd.argv
        cwd = app.user.chdir if app.user else str(workdir)
        given = server_env(server, workdir, {**cmd.env, **app_env, **env})
        with open(workdir / "server.log", "ab") as log:
            started_at = time.monotonic()
            proc = spawn(argv, procset.preexec(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         cwd=cwd, env={**given, **procset.env()})
    except BaseException:
        abandon(procset, workdir)
        raise
    running = RunningServer(spec, server, app.name, knobs, spec.host, port, argv, proc, procset,
                            workdir, workdir / "server.log", version, started_at, given, cwd,
                            settings, app.health, socket, version_from, limits=applied)
    _live.add(running)
    timeout = ready_timeout or (app.user and app.user.ready_timeout_s) or server.ready_timeout_s
    ready_or_stopped(running, lambda: _wait_ready(running, app, timeout), keep_log=True)
    running.startup_s = time.monotonic() - started_at
    return running


def abandon(procset: ProcessSet, workdir: Path) -> None:
    """Undo a start that failed or was interrupted before its process was handed back (Ctrl-C during
    the fork leaves a child no Popen knows of): kill the set, reap those of its processes that are our
    own children (a zombie keeps a cgroup v1 group busy), remove the group and the work dir."""
    with _signals_held():
        procset.kill_all()
        # a killed child leaves the set's task list before it is a zombie: reap until none of the
        # set is left, alive or ours to reap (bounded: SIGKILL takes effect at once)
        deadline = time.monotonic() + 5.0
        while True:
            exiting = survivors(procset.name)  # first: one that is a zombie by the reaping below is reaped
            for pid in zombie_children(procset.name):
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:  # reaped meanwhile
                    pass
            if not exiting or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        procset.remove()
        shutil.rmtree(workdir, ignore_errors=True)


def ready_or_stopped(running: Confined, check: Callable[[], None], keep_log: bool) -> None:
    """Run ``check`` (the ready wait, a seeding) on something just started; if it fails, stop it
    and raise one error with its log's tail (its work dir kept, for that log, with ``keep_log``:
    stale reaping leaves a dir with KEEP_MARK alone); if interrupted, stop it and go on unwinding."""
    try:
        check()
    except ArenaError as e:
        tail, cause = running.log_tail(), raised(log_text(running.log_path))  # before the stop removes the log
        running.stop(keep_workdir=keep_log)
        first = f"{e}: {cause}" if cause and cause not in str(e) else str(e)
        if keep_log:
            (running.workdir / KEEP_MARK).touch()
            first += f" (log {running.log_path})"
        raise FailedStart(f"{first}\nlast lines of its log:\n{tail}", tail,
                          str(running.log_path) if keep_log else None) from None
    except BaseException:
        running.stop()
        raise


_reaped = False


def reap(logs: bool = False) -> list[str]:
    """Clean up after Arena processes that died uncleanly: their servers' processes and groups,
    their work dirs and their drivers' temp dirs; failed starts' logs a week old (all of them with
    ``logs``). Returns what was reaped."""
    global _reaped
    _reaped = True
    return reap_stale() + [str(d) for d in reap_stale_workdirs(logs=logs)]


def reap_before_start() -> None:
    """Before this process's first start (of a server or a service), if nothing has reaped yet."""
    if not _reaped:
        reap()


KEEP_LOGS_S = 7 * 24 * 3600  # a failed start's log is kept a week (its failed run in the store names it)


def reap_stale_workdirs(tmp: Path | None = None, doomed: Callable[[str], bool] = stale, logs: bool = False,
                        now: float | None = None) -> list[Path]:
    """Remove the work dirs (and drivers' temp dirs) of dead Arena processes (or those ``doomed``
    accepts). A failed start's dir, kept for its log (KEEP_MARK), goes after KEEP_LOGS_S, or now
    with ``logs``."""
    removed = []
    now = time.time() if now is None else now
    for d in Path(tmp or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        if not d.is_dir() or not doomed(d.name):
            continue
        try:
            kept_since = (d / KEEP_MARK).stat().st_mtime
        except FileNotFoundError:
            kept_since = None
        if kept_since is None or logs or now - kept_since > KEEP_LOGS_S:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


# The process set must stay unchanged this long to count as started: about twice the largest gap
# between two changes of a start-up burst measured (gunicorn sleeps up to 0.1 s between forking its
# workers: 130 ms under a quota of half a CPU; benches/start_settle.py). Passenger's helpers come
# later: its ready_floor_s waits for them.
SETTLE_S = 0.25


HTTP_TRANSIENT = (OSError, ValueError, http.client.HTTPException)  # not up yet: try again


def poll_ready(name: str, timeout: float, exited: Callable[[], int | None], attempt: Callable[[], str | None],
               what: str, transient: tuple[type[BaseException], ...] = HTTP_TRANSIENT) -> None:
    """Call ``attempt`` every 50 ms until it returns None (ready): it returns what it saw otherwise,
    or raises ArenaError when the start cannot succeed; a ``transient`` exception is what ``what``
    (e.g. "GET /health") met. An error once ``exited`` gives an exit code, or after ``timeout``
    seconds with the last thing seen."""
    deadline = time.monotonic() + timeout
    last: str | None = "no answer"
    while True:
        code = exited()
        if code is not None:
            raise ArenaError(f"{name} exited with code {code} before it was ready")
        try:
            last = attempt()
            if last is None:
                return
        except transient as e:
            detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
            last = f"{what}: {e.__class__.__name__}: {detail}".rstrip(": ")
        if time.monotonic() > deadline:
            raise ArenaError(f"{name} was not ready after {timeout:.0f} s ({last})")
        time.sleep(0.05)


def _wait_ready(running: RunningServer, app: App, timeout: float) -> None:
    """Poll GET the app's health path until it answers below 400, check the answer came from our own
    process set (its X-Arena-Pid: every subject response has it, and the timing around a user's app
    adds it), then wait until the set has settled: servers that fork or spawn workers after answering
    (Passenger spawns up to its minimum after the first request, puma's cluster boots workers one by
    one) are not ready until every worker is up. Then a user's app gets its warm-up requests."""
    name = f"{running.server.name} ({running.app})"
    deadline = time.monotonic() + timeout

    def exited() -> int | None:  # a server that daemonizes leaves its processes behind its first one
        code = running.proc.poll()
        return code if code is not None and not running.procset.pids() else None

    refused: list[int] = []  # the app's own answers of 400 or more in a row

    def attempt() -> str | None:
        with Client(running.host, running.port, timeout=2, unix=running.socket) as client:
            reply = client.get(app.health)
            if reply.status >= 400:
                refusal(running, app, reply, refused)
                return f"GET {app.health} answered {reply.status}"
            refused.clear()
            pid = int(reply.headers.get("x-arena-pid", "0"))
            if pid not in running.procset.pids():
                where = running.socket or f"port {running.port}"
                raise ArenaError(f"{name}: {where} is answered by pid {pid}, which is not one of this server's processes")
            _wait_settled(running, deadline, name)
            _warm_up(running, app, client, name)
        return None

    try:
        poll_ready(name, timeout, exited, attempt, f"GET {app.health}")
    except ArenaError as e:
        raise ArenaError(f"{e}{_killed_starting(running)}") from None


def _killed_starting(running: RunningServer) -> str:
    """Where the kernel OOM-killed one of the server's processes while it started: said, with its limit."""
    events = running.procset.memory_events()
    if events is None or not events.oom_kills or running.spec.limits.memory_mib is None:
        return ""
    return (f": the kernel killed {events.oom_kills} of its processes at its memory limit of "
            f"{memory_text(running.spec.limits.memory_mib)} (memory_limit) while it started: starting takes more")


REFUSALS = 4  # the app's own answers of 400 or more in a row that end the ready wait: it is up, and says no
NOT_YET = 503  # "Service Unavailable": an app's own way to say it is not ready yet; never ends the wait


def refusal(running: RunningServer, app: App, reply, refused: list[int]) -> None:
    """Count an answer of 400 or more; at the REFUSALSth in a row from the app's own process (its
    X-Arena-Pid: not the server's own error page while the app loads), end the wait in one line: the
    status, and what to give (a 4xx) or what the app said (a 5xx: its body's first line; the caller
    adds the exception its log ends in)."""
    try:
        pid = int(reply.headers.get("x-arena-pid", "0"))
    except ValueError:
        pid = 0
    if reply.status == NOT_YET or pid not in running.procset.pids():
        refused.clear()
        return
    refused.append(reply.status)
    if len(refused) < REFUSALS:
        return
    said = f"{running.server.name} ({running.app}): GET {app.health} answered {reply.status}"
    if reply.status < 500:
        raise ArenaError(f"{said}: give --health PATH (a path the app answers below 400; in an experiment file, "
                         "the app table's health)")
    raise ArenaError(said + (f": {line}" if (line := first_text_line(reply.body)) else ""))


def first_text_line(body: bytes) -> str | None:
    """The first line of a body that says something: HTML's tags dropped, at most 200 characters."""
    text = re.sub(r"<[^>]*>", " ", body[:65536].decode("utf-8", "replace"))
    line = next((" ".join(x.split()) for x in text.splitlines() if x.strip()), None)
    return line[:200] if line else None


def _warm_up(running: RunningServer, app: App, client: Client, name: str) -> None:
    """A user's warm-up paths, once each: an answer of 500 or more stops the start."""
    for path in app.user.warmup if app.user else ():
        reply = client.get(path)
        if reply.status >= 500:
            raise ArenaError(f"{name}: warm-up GET {path} answered {reply.status}")


def _wait_settled(running: RunningServer, deadline: float, name: str) -> None:
    seen, since = sorted(running.procset.pids()), time.monotonic()
    floor = running.started_at + running.server.ready_floor_s
    while time.monotonic() - since < SETTLE_S or time.monotonic() < floor:
        if time.monotonic() > deadline:
            raise ArenaError(f"{name}: its processes kept changing until the ready timeout ({seen})")
        time.sleep(0.05)
        now = sorted(running.procset.pids())
        if now != seen:
            seen, since = now, time.monotonic()
