"""A configuration as the files people deploy with: the server's own config file where it has an
idiomatic one (puma.rb, gunicorn.conf.py, unicorn.conf.rb, uwsgi.ini, Passengerfile.json: JSON has
no comments, the header is in run.sh), the command line that starts it, and the
environment variables the server's conventions read (WEB_CONCURRENCY, RAILS_MAX_THREADS: each
knob's ``Knob.env`` in the catalog). Pure: text in, text out; the caller writes the files.

The command line is the catalog's own (``build_command``: the flags Arena measured with) bound to
0.0.0.0 on the server's usual port, with the Python servers' executables by name; the files carry
a header of comment lines the caller gives (the evidence)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from arena.servers import catalog
from arena.subjects import App

PORTS = {"ruby": 9292, "python": 8000}  # rackup's and gunicorn's usual ports
HOST = "0.0.0.0"


@dataclass(frozen=True)
class Deployment:
    server: str
    app: App
    processes: int | None
    threads: int | None

    @property
    def knobs(self) -> dict[str, int | None]:
        """Every knob of the server for the app: the chosen processes and threads, else its default."""
        given = {"processes": self.processes, "threads": self.threads}
        return {k: given.get(k) if given.get(k) is not None else knob.default
                for k, knob in catalog.knobs_for(catalog.get_server(self.server), self.app).items()}


def files(d: Deployment, header: list[str]) -> dict[str, str]:
    """File name -> its text: the server's config file (where it has one), ``run.sh`` (the command)
    and ``arena.env`` (the convention variables)."""
    s = catalog.get_server(d.server)
    out: dict[str, str] = {}
    port = PORTS[s.language]
    own = _own_config(d, s, port)
    if own is not None:
        name, text, argv = own
        out[name] = text if name.endswith(".json") else _comments(header, ";" if name.endswith(".ini") else "#") + text
    else:
        argv = _command(d, s, port)
    out["run.sh"] = ("#!/bin/sh\n" + _comments(header, "#") + "".join(f"export {k}={shlex.quote(v)}\n"
                                                                     for k, v in sorted(s.env.items()))
                     + "exec " + shlex.join(argv) + "\n")
    env = environment(d)
    out["arena.env"] = _comments(header, "#") + "".join(f"{k}={v}\n" for k, v in env.items())
    return out


def environment(d: Deployment) -> dict[str, str]:
    """The variables the server's conventions read for its knobs (WEB_CONCURRENCY, RAILS_MAX_THREADS)."""
    s = catalog.get_server(d.server)
    return {s.knobs[k].env: str(v) for k, v in d.knobs.items() if v is not None and s.knobs[k].env}  # type: ignore[misc]


def _comments(lines: list[str], mark: str) -> str:
    return "".join(f"{mark} {line}".rstrip() + "\n" for line in lines)


def _command(d: Deployment, s: catalog.Server, port: int) -> list[str]:
    """The catalog's command for the configuration, its executables by name."""
    cmd = catalog.build_command(s, d.app, d.knobs, host=HOST, port=port, workdir=Path("."), bin_dir=Path("/bin"))
    argv = [a.removeprefix("/bin/") for a in cmd.argv]
    if any("{workdir}" in part or "{config}" in part for part in s.command):
        raise ValueError(f"{s.name}: its command needs Arena's working files; write its own config instead")
    return argv


def _own_config(d: Deployment, s: catalog.Server, port: int) -> tuple[str, str, list[str]] | None:
    """(file name, text, the command that reads it) for servers with an idiomatic config file."""
    target = d.app.target
    if s.name == "puma":
        lines = ([f"workers {d.processes}"] if (d.processes or 1) > 1 else []) + \
                [f"threads {d.threads or 5}, {d.threads or 5}", f'bind "tcp://{HOST}:{port}"',
                 'environment "production"']
        return "puma.rb", "".join(f"{line}\n" for line in lines), ["puma", "-C", "puma.rb", target]
    if s.name == "unicorn":
        text = f"worker_processes {d.processes or 1}\nlisten \"{HOST}:{port}\"\ntimeout 120\n"
        return "unicorn.conf.rb", text, ["unicorn", "-c", "unicorn.conf.rb", "-E", "production", target]
    if s.name.startswith("gunicorn-"):
        worker = s.command[s.command.index("-k") + 1]
        lines = [f'bind = "{HOST}:{port}"', f"workers = {d.processes or 1}", f'worker_class = "{worker}"']
        if "threads" in d.knobs and d.threads is not None:
            lines.append(f"threads = {d.threads}")
        if "connections" in s.knobs:
            lines.append(f"worker_connections = {s.knobs['connections'].default or 1000}")
        lines += ["accesslog = None", "errorlog = \"-\""]
        return "gunicorn.conf.py", "".join(f"{line}\n" for line in lines), ["gunicorn", "-c", "gunicorn.conf.py", target]
    if s.name == "uwsgi":
        lines = ["[uwsgi]", f"http11-socket = {HOST}:{port}", "master = true", "die-on-term = true", "need-app = true",
                 f"module = {target}", f"processes = {d.processes or 1}", f"threads = {d.threads or 1}"]
        return "uwsgi.ini", "".join(f"{line}\n" for line in lines), ["uwsgi", "--ini", "uwsgi.ini"]
    if s.name == "passenger":  # Passenger Standalone reads Passengerfile.json from the app's directory
        n = d.processes or s.knobs["processes"].default
        conf = {"environment": "production", "address": HOST, "port": port, "rackup": target,
                "max_pool_size": n, "min_instances": n}
        return "Passengerfile.json", json.dumps(conf, indent=2) + "\n", ["passenger", "start"]
    return None
