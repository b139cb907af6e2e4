"""A configuration as the files people deploy with: the server's own config file where it has an
idiomatic one (puma.rb, gunicorn.conf.py, unicorn.conf.rb, uwsgi.ini), the command line that starts
it (run.sh), a small launcher for the servers that have no command line of their own (serve.py), and
the environment variables the server's conventions read (WEB_CONCURRENCY, RAILS_MAX_THREADS: each
knob's ``Knob.env`` in the catalog). Pure: text in, text out; the caller writes the files.

What is deployed is the app itself, never Arena's timing wrapper: a user's Python app by its own
``module:callable`` (imported from the directory run.sh is started in, with the server of its
``--venv`` where one was given), a user's Rack app by its own config.ru (under ``bundle exec`` where
it has a Gemfile). run.sh is run from the app's directory (``sh DIR/run.sh``) and finds the config
files beside itself. The command is the catalog's own (``build_command``: the flags Arena measured
with) bound to 0.0.0.0 on the port in ``$PORT``, the platforms' convention (Heroku, Cloud Run,
Render, Fly give it), else the server's usual one: run.sh sets ``PORT=${PORT:-8000}`` (9292 for a
Rack app) and its command and the server's own config read it. The files carry a header of comment
lines the caller gives (the evidence)."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from arena.limits import PERIOD_S, Limits
from arena.servers import catalog
from arena.subjects import App

PORTS = {"ruby": 9292, "python": 8000}  # rackup's and gunicorn's usual ports
HOST = "0.0.0.0"
HERE = "$here"  # run.sh's own directory, where the config files are (set by its first lines)
PORT = "$PORT"  # the port, as run.sh's words say it (set by its first lines to the platform's, or the usual)

# Servers with no command line of their own (Arena runs them by a module of its own): the launcher
# written beside run.sh instead, which imports nothing of Arena: its docstring, the app loaded from
# ``python serve.py HOST PORT module:callable`` (module:factory() called), then the serving lines.
_LOAD_APP = """import importlib
import sys

host, port, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
module, _, attr = target.partition(":")
sys.path.insert(0, ".")
app = importlib.import_module(module)
for part in attr.removesuffix("()").split("."):
    app = getattr(app, part)
app = app() if attr.endswith("()") else app
"""
LAUNCHERS = {
    "wsgiref": ('"""Serve a WSGI app with the standard library\'s wsgiref: one request at a time."""\n' + _LOAD_APP
                + "from wsgiref.simple_server import WSGIRequestHandler, make_server\n\n\n"
                  "class QuietHandler(WSGIRequestHandler):\n"
                  "    def log_message(self, format, *args):\n"
                  "        pass\n\n\n"
                  "make_server(host, port, app, handler_class=QuietHandler).serve_forever()\n"),
    "bjoern": ('"""Serve a WSGI app with bjoern (libev, one process), which has no command line of its own."""\n'
               + _LOAD_APP + "import bjoern\n\n"
                             "try:\n"
                             "    bjoern.run(app, host, port)\n"
                             "except KeyboardInterrupt:\n"
                             "    pass\n"),
}
# How a server is told that its target is a factory to call (module:make()): where its own syntax
# does not take the call (gunicorn and hypercorn do), the flag that says so, the target without "()".
FACTORY_FLAGS = {"uvicorn": ("--factory",), "granian": ("--factory",), "waitress": ("--call",)}


@dataclass(frozen=True)
class Deployment:
    server: str
    app: App
    processes: int | None
    threads: int | None
    bundled: bool = False  # a user's Rack app with its own Gemfile: run under bundle exec
    limits: Limits = Limits()  # a container's limits it was measured under: kubernetes.yaml and docker-run.sh
    directory: str = "deploy"  # where the files are, from the app's directory (in the image too)

    @property
    def knobs(self) -> dict[str, int | None]:
        """Every knob of the server for the app: the chosen processes and threads, else its default."""
        given = {"processes": self.processes, "threads": self.threads}
        return {k: given.get(k) if given.get(k) is not None else knob.default
                for k, knob in catalog.knobs_for(catalog.get_server(self.server), self.app).items()}

    @property
    def target(self) -> str:
        """What the server is given: a user's own module:callable or config.ru (relative to the app's
        directory, where run.sh is started), else the subject's."""
        user = self.app.user
        if user is None:
            return self.app.target
        return os.path.relpath(user.source, user.chdir) if self.app.interface == "rack" else user.source

    @property
    def bin_dir(self) -> Path | None:
        """Where the Python servers are: the user's --venv; None: found on PATH by name."""
        return self.app.user.bin_dir if self.app.user else None


def files(d: Deployment, header: list[str]) -> dict[str, str]:
    """File name -> its text: the server's config file (where it has one), ``serve.py`` (where the
    server has no command line), ``run.sh`` (the command) and ``arena.env`` (the convention variables)."""
    s = catalog.get_server(d.server)
    out: dict[str, str] = {}
    port = PORTS[s.language]
    own = _own_config(d, s, port)
    if own is not None:
        name, text, argv = own
        out[name] = _comments(header, ";" if name.endswith(".ini") else "#") + text
    elif s.name in LAUNCHERS:
        out["serve.py"] = _comments(header, "#") + LAUNCHERS[s.name]
        argv = [str(d.bin_dir / "python") if d.bin_dir else "python3", f"{HERE}/serve.py", HOST, PORT, d.target]
    else:
        argv = _command(d, s)
    out["run.sh"] = run_sh(d, s, argv, header, port)
    env = environment(d)
    out["arena.env"] = _comments(header, "#") + "".join(f"{k}={v}\n" for k, v in env.items())
    if d.limits.any:
        out["kubernetes.yaml"] = kubernetes_yaml(d, port, header)
        out["docker-run.sh"] = docker_run_sh(d, port, header)
    return out


def kubernetes_yaml(d: Deployment, port: int, header: list[str]) -> str:
    """A Deployment of one container that runs run.sh under the limits measured: ``resources``
    requests equal to its limits (the Guaranteed class: the quota is the CPU it gets), the server's
    convention variables each after a comment line saying where its value comes from. Its image is
    the user's (the app, its server and these files): the one line to change."""
    lim = d.limits
    quantities = {**({"cpu": _cpu_quantity(lim.cpu)} if lim.cpu is not None else {}),
                  **({"memory": _memory_quantity(lim.memory_mib)} if lim.memory_mib is not None else {})}
    resources = "".join(f"              {k}: {json.dumps(v)}\n" for k, v in quantities.items())
    env = "".join(f"            # {var}={d.knobs[knob]}: the {knob} measured (the evidence above)\n"
                  f"            - name: {var}\n              value: {json.dumps(str(d.knobs[knob]))}\n"
                  for knob, var in _convention_knobs(d))
    period = ([f"The CPU quota was measured with a {lim.cpu_period_s * 1000:g} ms period; Kubernetes uses the "
               "node's (the kubelet's cpuCFSQuotaPeriod, 100 ms by default)."]
              if lim.cpu is not None and lim.cpu_period_s != PERIOD_S else [])
    return (_comments(header + period + ["Set image to yours: the app, its server and these files at "
                                         f"{d.directory}/, with the app's directory as its working directory."], "#")
            + "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  replicas: 1\n"
            "  selector:\n    matchLabels:\n      app: app\n  template:\n    metadata:\n      labels:\n"
            "        app: app\n    spec:\n      containers:\n        - name: app\n          image: your-app-image\n"
            f"          command: [\"sh\", {json.dumps(d.directory + '/run.sh')}]\n"
            f"          ports:\n            - containerPort: {port}\n"
            + (f"          env:\n{env}" if env else "")
            + f"          resources:\n            requests:\n{resources}            limits:\n{resources}")


def docker_run_sh(d: Deployment, port: int, header: list[str]) -> str:
    """``docker run`` of the user's image under the limits measured (no swap beyond the memory
    limit, as the measurement had none), with the convention variables, running run.sh."""
    lim = d.limits
    flags = []
    if lim.cpu is not None:
        flags += (["--cpus", f"{lim.cpu:g}"] if lim.cpu_period_s == PERIOD_S else
                  ["--cpu-period", str(lim.period_us), "--cpu-quota", str(lim.quota_us)])
    if lim.memory_mib is not None:
        size = f"{lim.memory_mib:g}m" if float(lim.memory_mib).is_integer() else f"{lim.memory_bytes}b"  # m: MiB
        flags += ["--memory", size, "--memory-swap", size]
    for k, v in environment(d).items():
        flags += ["-e", f"{k}={v}"]
    lines = ["#!/bin/sh", *(f"# {line}".rstrip() for line in header),
             f"# Usage: sh {d.directory}/docker-run.sh IMAGE  (the app, its server and these files at {d.directory}/,",
             "# with the app's directory as the image's working directory)",
             'image=${1:?usage: sh docker-run.sh IMAGE}',
             "exec docker run --rm " + " ".join(shlex.quote(f) for f in flags)
             + f' -p {port}:{port} "$image" sh {shlex.quote(d.directory + "/run.sh")}']
    return "\n".join(lines) + "\n"


def _cpu_quantity(cores: float) -> str:
    """Kubernetes' CPU quantity: "1", "1.5" -> "1500m", "0.25" -> "250m"."""
    return f"{cores:g}" if float(cores).is_integer() else f"{round(cores * 1000)}m"


def _memory_quantity(mib: float) -> str:
    """Kubernetes' memory quantity: "512Mi", or bytes where the limit is not a whole MiB."""
    return f"{mib:g}Mi" if float(mib).is_integer() else str(int(mib * 1024 * 1024))


def _convention_knobs(d: Deployment) -> list[tuple[str, str]]:
    """(knob, the variable the server's convention reads for it) of each knob set."""
    s = catalog.get_server(d.server)
    return [(k, s.knobs[k].env) for k, v in d.knobs.items() if v is not None and s.knobs[k].env]  # type: ignore[misc]


def run_sh(d: Deployment, s: catalog.Server, argv: list[str], header: list[str], port: int) -> str:
    """The script that starts the server from the app's directory, its config files found beside it,
    on the platform's ``$PORT`` (``port`` where none is given)."""
    lines = ["#!/bin/sh", *(f"# {line}".rstrip() for line in header),
             "# Run it from the app's directory: sh path/to/run.sh",
             'here=$(cd "$(dirname "$0")" && pwd)',
             f'export PORT="${{PORT:-{port}}}"  # the platform\'s port where it gives one (Heroku, Cloud Run, Fly)']
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(s.env.items())]
    if s.language == "python":  # the app's module is imported from the directory it is started in
        lines.append('export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"')
    prefix = ["bundle", "exec"] if d.bundled else []
    lines.append("exec " + " ".join(_shell_word(a) for a in prefix + argv))
    return "\n".join(lines) + "\n"


def _shell_word(arg: str) -> str:
    """A word of run.sh: quoted, with ``$here`` and ``$PORT`` left for the shell to expand."""
    if arg.startswith(HERE + "/"):
        return '"$here"/' + shlex.quote(arg[len(HERE) + 1:])
    if PORT in arg:
        return '"$PORT"'.join(shlex.quote(part) if part else "" for part in arg.split(PORT))
    return shlex.quote(arg)


def environment(d: Deployment) -> dict[str, str]:
    """The variables the server's conventions read for its knobs (WEB_CONCURRENCY, RAILS_MAX_THREADS)."""
    return {var: str(d.knobs[knob]) for knob, var in _convention_knobs(d)}


def _comments(lines: list[str], mark: str) -> str:
    return "".join(f"{mark} {line}".rstrip() + "\n" for line in lines)


def _executable(d: Deployment, name: str) -> str:
    """A Python server's executable: the venv's, by its path, else by name (found on PATH)."""
    return str(d.bin_dir / name) if d.bin_dir is not None else name


def _target(d: Deployment, s: catalog.Server) -> tuple[str, list[str]]:
    """The target as ``s`` takes it, and the flags that say it is a factory where it needs them."""
    target = d.target
    if target.endswith("()") and s.name in FACTORY_FLAGS:
        return target.removesuffix("()"), list(FACTORY_FLAGS[s.name])
    return target, []


def _command(d: Deployment, s: catalog.Server) -> list[str]:
    """The catalog's command for the configuration, its executables by name (or the venv's), without
    the flags that point a server at Arena's working files (Passenger's pid file, registry and log:
    deployed, it keeps its own defaults)."""
    command: list[str] = []
    for part in s.command:
        if "{workdir}" in part and command and command[-1].startswith("--"):
            command.pop()  # the flag and its value
        else:
            command.append(part)
    if any("{workdir}" in part or "{config}" in part for part in command):
        raise ValueError(f"{s.name}: its command needs Arena's working files; write its own config instead")
    target, factory = _target(d, s)
    bin_dir = d.bin_dir or Path("/bin")
    cmd = catalog.build_command(replace(s, command=tuple(command)), replace(d.app, target=target), d.knobs, host=HOST,
                                port=PORT, workdir=Path("."), bin_dir=bin_dir)
    argv = [a if d.bin_dir else a.removeprefix("/bin/") for a in cmd.argv]
    at = len(argv) - 1 if s.command[-1] == "{target}" else len(argv)
    return argv[:at] + factory + argv[at:]


def _own_config(d: Deployment, s: catalog.Server, port: int) -> tuple[str, str, list[str]] | None:
    """(file name, text, the command that reads it) for servers with an idiomatic config file; the
    command names the file beside run.sh; each binds the port in ``$PORT`` (``port`` where none is set)."""
    target = d.target
    ruby_port = f'#{{ENV.fetch("PORT", "{port}")}}'
    if s.name == "puma":
        lines = ([f"workers {d.processes}"] if (d.processes or 1) > 1 else []) + \
                [f"threads {d.threads or 5}, {d.threads or 5}", f'bind "tcp://{HOST}:{ruby_port}"',
                 'environment "production"']
        return "puma.rb", "".join(f"{line}\n" for line in lines), ["puma", "-C", f"{HERE}/puma.rb", target]
    if s.name == "unicorn":
        text = f"worker_processes {d.processes or 1}\nlisten \"{HOST}:{ruby_port}\"\ntimeout 120\n"
        return "unicorn.conf.rb", text, ["unicorn", "-c", f"{HERE}/unicorn.conf.rb", "-E", "production", target]
    if s.name.startswith("gunicorn-"):
        worker = s.command[s.command.index("-k") + 1]
        lines = ["import os", "", f'bind = "{HOST}:" + os.environ.get("PORT", "{port}")', f"workers = {d.processes or 1}",
                 f'worker_class = "{worker}"']
        if "threads" in d.knobs and d.threads is not None:
            lines.append(f"threads = {d.threads}")
        if "connections" in s.knobs:
            lines.append(f"worker_connections = {s.knobs['connections'].default or 1000}")
        lines += ["accesslog = None", "errorlog = \"-\""]
        return ("gunicorn.conf.py", "".join(f"{line}\n" for line in lines),
                [_executable(d, "gunicorn"), "-c", f"{HERE}/gunicorn.conf.py", target])
    if s.name == "uwsgi":
        if target.endswith("()"):
            raise ValueError(f"uwsgi: its module option names a callable, not a factory to call ({target}): "
                             "give the app as a module-level callable")
        lines = ["[uwsgi]", f"http11-socket = {HOST}:$(PORT)", "master = true", "die-on-term = true", "need-app = true",
                 f"module = {target}", f"processes = {d.processes or 1}", f"threads = {d.threads or 1}"]
        if d.bin_dir is not None:
            lines.append(f"home = {d.bin_dir.parent}")
        return "uwsgi.ini", "".join(f"{line}\n" for line in lines), [_executable(d, "uwsgi"), "--ini", f"{HERE}/uwsgi.ini"]
    return None
