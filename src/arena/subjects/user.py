"""A user's own app as an :class:`App`: a Rack app (its ``config.ru``) or a WSGI/ASGI callable
(``module:callable``), served by the catalog's servers with Arena's timing wrapped around it
(wrap/arena_timing.rb, wrap/arena_wrap.py).

Where it runs: a Rack app from its config.ru's directory (``bundle exec`` when a Gemfile is there),
a Python app from ``chdir`` (first on its path), optionally with the servers of another Python
environment (``venv``). It is ready when its health path answers below 400; its warm-up paths are
requested once each after that, before anything is measured.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from arena.errors import ArenaError

WRAP_DIR = Path(__file__).parent / "wrap"
RACK_WRAPPER = WRAP_DIR / "arena_timing.rb"
PYTHON_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*(\(\))?")
INTERFACES = ("rack", "wsgi", "asgi")
DEFAULT_HEALTH = "/"


@dataclass(frozen=True)
class UserApp:
    """Where a user's app lives and how it is run (the built-in apps have none)."""

    source: str  # the config.ru's path or module:callable, as resolved
    chdir: str  # the server's working directory
    venv: str | None = None  # a Python environment whose bin/ has the server (Python apps)
    ready_timeout_s: float | None = None  # None: the server's own
    health_given: bool = True  # False: the health path is the default, which the measured path replaces
    warmup: tuple[str, ...] = ()  # paths requested once after it is ready
    warnings: tuple[str, ...] = ()  # what may make it fail or mislead, for the caller to print

    @property
    def bin_dir(self) -> Path | None:
        """The bin/ of its Python environment (``venv``), where its servers are."""
        return Path(self.venv) / "bin" if self.venv else None

    def rackup(self, wrapper: Path = RACK_WRAPPER) -> str:
        """The config.ru Arena writes for a Rack app: its timing first, then the user's app."""
        return (f"require {str(wrapper)!r}\n"
                f"use ArenaTiming\n"
                f"run ArenaTiming.rackup({self.source!r})\n")


def measured_health(app, path: str | None):
    """``app`` with ``path`` (what the experiment measures: a GET) as its health path, where it is a
    user's app whose health path was not given: an app that serves what is measured is ready."""
    from dataclasses import replace

    if app is None or getattr(app, "user", None) is None or app.user.health_given or path is None:
        return app
    return replace(app, health=path)


def path_or_health(value: str, flag: str) -> str:
    if not value.startswith("/") or re.search(r"[\s\x00-\x1f\x7f]", value):
        raise ArenaError(f"{flag}: must be a path starting with /, got '{value}'")
    return value


def user_app(source: str, *, base: Path, interface: str | None = None, chdir: str | None = None,
             venv: str | None = None, health: str | None = None, ready_timeout_s: float | None = None,
             warmup: Iterable[str] = (), name: str | None = None, serves: Iterable[str] = (),
             flag: str = "--app"):
    """The App for ``source``: a config.ru (or a directory holding one) for a Rack app, or
    ``module:callable`` (``module:factory()``) for a Python app, whose interface is ``interface`` or
    else the only Python one among ``serves`` (the servers'). Relative paths are from ``base`` (the
    current directory for the CLI, the experiment file's directory for an experiment)."""
    from arena.subjects import App

    given = health is not None
    health = path_or_health(health, "--health") if given else DEFAULT_HEALTH
    warm = tuple(path_or_health(p, "--warmup") for p in warmup)
    if PYTHON_TARGET.fullmatch(source) and not source.endswith(".ru"):
        serves_py = sorted({i for i in serves if i in ("wsgi", "asgi")})
        if interface is not None and interface not in ("wsgi", "asgi"):
            raise ArenaError(f"--interface: must be wsgi or asgi for {source}, got '{interface}'")
        where = _directory(base, chdir or ".", "--chdir")
        env = venv_dir(base, venv) if venv is not None else None
        if interface is None:
            if not serves_py:
                raise ArenaError(f"--interface: {source} needs a WSGI or ASGI server: the servers serve neither")
            interface = serves_py[0] if len(serves_py) == 1 else interface_of(source, where, env, flag)
        user = UserApp(source, where, env, ready_timeout_s, given, warm, shadowing(source, where))
        return App(name or source, "python", interface, f"arena_wrap:{interface}", f"{interface} app {source}",
                   health=health, user=user)
    if interface not in (None, "rack"):
        raise ArenaError(f"--interface: a config.ru is a Rack app, got '{interface}'")
    if venv is not None:
        raise ArenaError(f"--venv: applies to a Python app (module:callable), not to {source}")
    path = _resolved(base, source, flag)
    if path.is_dir():
        path = path / "config.ru"
    if not path.is_file():
        if ":" in source and not source.endswith(".ru"):
            raise ArenaError(f"{flag}: '{source}' is neither module:callable (one colon: package.module:attribute, "
                             f"or module:factory()) nor a config.ru ({path} does not exist)")
        if not source.endswith(".ru") and ":" not in source and "/" not in source:
            from arena.subjects import APPS

            raise ArenaError(f"{flag}: '{source}' is not a built-in app ({', '.join(APPS)}), a config.ru or "
                             "module:callable")
        raise ArenaError(f"{flag}: {path} does not exist (a Rack app's config.ru, or a directory holding one)")
    _check_rackup(path, flag)
    where = _directory(base, chdir, "--chdir") if chdir else str(path.parent)
    user = UserApp(str(path), where, None, ready_timeout_s, given, warm)
    from arena.subjects import APPS

    default = path.parent.name if path.parent.name not in APPS else f"{path.parent.name}/{path.name}"  # not a built-in's
    return App(name or default, "ruby", "rack", "", f"Rack app {path}", health=health, user=user)


RACK_RUN = re.compile(r"^\s*(run|map)\b", re.MULTILINE)  # Rack::Builder's rule: a run or a map statement


def _check_rackup(path: Path, flag: str) -> None:
    """A config.ru Ruby can parse (``ruby -c``) that runs or maps an app, before any server is given it."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise ArenaError(f"{flag}: {path}: cannot read it ({e.strerror})") from None
    if not RACK_RUN.search(text):
        raise ArenaError(f"{flag}: {path} is not a Rack app: it has no run or map statement")
    if shutil.which("ruby") is None:
        return  # the Ruby servers are not installed either: the start says so
    try:
        out = subprocess.run(["ruby", "-c", str(path)], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ArenaError(f"{flag}: {path}: ruby -c failed ({e})") from None
    if out.returncode != 0:
        first = next((line for line in out.stderr.splitlines() if line.strip()), f"exit {out.returncode}")
        raise ArenaError(f"{flag}: {path} does not parse as Ruby: {first.strip()}")


# Imports the target as the timing wrapper will (arena_wrap._load) and prints its interface: an
# ``async def`` callable (or an object whose __call__ is one: Starlette, FastAPI, Django's ASGIHandler)
# is ASGI 3, any other callable WSGI (Flask, Django's WSGIHandler) -- uvicorn's own test for ASGI 3.
_INTERFACE = ("import inspect, arena_wrap; app = arena_wrap._load(); "
              "call = app if inspect.isfunction(app) or inspect.ismethod(app) else getattr(app, '__call__', app); "
              "print('asgi' if inspect.iscoroutinefunction(call) else 'wsgi')")


def interface_of(source: str, chdir: str, venv: str | None, flag: str = "--app", timeout: float = 60.0) -> str:
    """The interface of a user's Python app, found by importing it in its own interpreter (the venv's,
    else Arena's) from its directory; an app that does not import is one line saying why, before any
    server is started."""
    python = str(Path(venv) / "bin" / "python") if venv else sys.executable
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "HOME")}
    env.update(ARENA_USER_APP=source, ARENA_USER_DIR=chdir, PYTHONPATH=os.pathsep.join((str(WRAP_DIR), chdir)),
               PYTHONDONTWRITEBYTECODE="1")
    try:
        out = subprocess.run([python, "-c", _INTERFACE], cwd=chdir, env=env, capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ArenaError(f"{flag} {source}: importing it from {chdir} took over {timeout:.0f} s") from None
    except OSError as e:
        raise ArenaError(f"{flag} {source}: {python} cannot run ({e.strerror})") from None
    found = out.stdout.strip().splitlines()[-1:] if out.returncode == 0 else []
    if found in (["asgi"], ["wsgi"]):
        return found[0]
    last = next((line for line in reversed(out.stderr.splitlines()) if line.strip()), f"exit {out.returncode}")
    raise ArenaError(f"{flag} {source}: does not import from {chdir}: "
                     f"{last.strip().removeprefix('RuntimeError: ARENA_USER_APP: ')}")


def shadowing(source: str, chdir: str) -> tuple[str, ...]:
    """A warning where the app's directory (first on its path) holds a folder named like the app's
    top module without an __init__.py: ``import`` takes it for a namespace package wherever the
    module itself is not installed, and the app then "has no attribute" (a checkout of a package named
    like it, in the directory --chdir defaults to)."""
    top = source.partition(":")[0].split(".")[0]
    folder = Path(chdir) / top
    if folder.is_dir() and not (folder / "__init__.py").exists():
        return (f"--app {source}: {folder} is a folder without __init__.py named like the app's module, first on "
                f"its path: where {top} is not installed it is imported instead (give --chdir the app's own "
                "directory)",)
    return ()


def venv_dir(base: Path, venv: str) -> str:
    """``--venv``'s environment, resolved from ``base``: a directory with bin/python."""
    env = _directory(base, venv, "--venv")
    if not (Path(env) / "bin" / "python").exists():
        raise ArenaError(f"--venv: {env} is not a Python environment (it has no bin/python)")
    return env


def _resolved(base: Path, value: str, flag: str) -> Path:
    """``value`` as a path from ``base``; a NUL byte (which a TOML string may hold) names no file."""
    if "\x00" in value:
        raise ArenaError(f"{flag}: {value!r} holds a NUL byte, which no path can")
    return (base / value).resolve()


def _directory(base: Path, value: str, flag: str) -> str:
    path = _resolved(base, value, flag)
    if not path.is_dir():
        raise ArenaError(f"{flag}: {path} is not a directory")
    return str(path)


def app_for(value: str | None, serves: Iterable[str], *, base: Path | None = None, chdir: str | None = None,
            venv: str | None = None, interface: str | None = None, health: str | None = None,
            warmup: Iterable[str] = (), ready_timeout_s: float | None = None):
    """The command line's app: a built-in app's name stays a name (None: the server's first), anything
    else is a user's app (user_app, relative to the current directory); the user's-app options
    without one are an error."""
    from arena.subjects import APPS

    warmup = tuple(warmup)
    if value is None or value in APPS:
        given = [flag for flag, v in (("--chdir", chdir), ("--venv", venv), ("--interface", interface),
                                      ("--health", health), ("--ready-timeout", ready_timeout_s),
                                      ("--warmup", warmup or None)) if v is not None]
        if given:
            raise ArenaError(f"{given[0]}: applies to a user's app (--app path/to/config.ru or --app module:callable), "
                             f"not to {'the built-in app ' + value if value else 'the default app'}")
        return value
    return user_app(value, base=base or Path.cwd(), interface=interface, chdir=chdir, venv=venv,
                    health=health, ready_timeout_s=ready_timeout_s, warmup=warmup, serves=serves)
