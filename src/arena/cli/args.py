"""Argument types shared by the commands: each refuses bad input in one line naming the flag."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys

from arena.atomic import write_file
from arena.errors import ArenaError, did_you_mean
from arena.limits import PERIOD_RANGE_S, PERIOD_S, Limits, cpu_problem, memory_problem, period_problem
from arena.servers import catalog
from arena.servers.catalog import KNOB_MAX
from arena.cpus import parse_cpu_list

EXIT_ERROR, EXIT_FAILED, EXIT_NOT_SAVED, EXIT_INTERRUPTED, EXIT_TERMINATED = 2, 1, 3, 130, 143
EXIT_THRESHOLD = 4  # every run valid, but a threshold of the experiment failed
# The model's input bounds: the exact MVA is quadratic in the clients (2,000 take about 3 s here),
# and times beyond an hour per request are a mistake, not a workload.
MODEL_CLIENTS = 2000
MODEL_MS = 3_600_000.0


def count(flag: str, lo: int = 1, hi: int = 4096):
    def parse(text: str) -> int:
        if not text.isdigit() or not lo <= int(text) <= hi:
            raise argparse.ArgumentTypeError(f"must be a whole number from {lo} to {hi}, got '{text}'")
        return int(text)

    parse.__name__ = flag
    return parse


def positive(flag: str, zero: bool = False, lo: float | None = None, hi: float = 1e9, what: str = "a number"):
    """A finite number above 0 (or from 0 with ``zero``, or from ``lo``), at most ``hi`` (``what``
    the error calls it)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low_ok = value >= lo if lo is not None else (value >= 0 if zero else value > 0)
        if not (low_ok and value <= hi):
            least = f"from {lo:g}" if lo is not None else ">= 0" if zero else "above 0"
            raise argparse.ArgumentTypeError(f"must be {what} {least}, at most {hi:g}, got '{text}'")
        return value

    parse.__name__ = flag
    return parse


def duration(flag: str, most: float, least: float = 0.0):
    """``10s``, ``500ms``, ``2m`` or a plain number of seconds, from ``least`` to ``most`` -> seconds
    (experiment files' rule)."""
    from arena.plan.reader import parse_duration

    bounds = f"at most {most:g}s" if least == 0 else f"from {least * 1000:g}ms to {most:g}s"

    def parse(text: str) -> float:
        value = parse_duration(text)
        if value is None or not least <= value <= most:
            raise argparse.ArgumentTypeError(f"must be a duration such as 10s, 500ms or 2m, {bounds}, got '{text}'")
        return value

    parse.__name__ = flag
    return parse


def rate(flag: str):
    """Bytes per second: ``64KiB/s``, ``1.5MB/s`` or a plain number (experiment files' rule)."""
    from arena.clients import RATE_FORM, parse_rate

    def parse(text: str) -> int:
        value = parse_rate(text)
        if value is None:
            raise argparse.ArgumentTypeError(f"must be {RATE_FORM}, got '{text}'")
        return value

    parse.__name__ = flag
    return parse


def listof(item):
    """A comma-separated list of ``item``s: '1,8,32'."""
    def parse(text: str) -> list:
        return [item(part.strip()) for part in text.split(",") if part.strip()] or [item("")]

    parse.__name__ = getattr(item, "__name__", "list")
    return parse


def cpus(text: str) -> list[int]:
    try:
        return parse_cpu_list(text)
    except ArenaError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--cpus: ")) from None


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, like every other Arena error
        wrong = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if wrong:  # a mistyped command or choice: say what was likely meant
            choices = re.findall(r"'([^']*)'", wrong.group(2))
            hint = did_you_mean(wrong.group(1), choices)
            message = message[:-1] + (f"; {hint.strip()})" if hint else ")")
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, with a likely meant option beside one it does not know (--dryrun: did you
        mean --dry-run?), from the options of the command given."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            options = list(self._option_string_actions)
            for action in self._actions:
                if isinstance(action, argparse._SubParsersAction) and getattr(ns, action.dest, None) in action.choices:
                    options = list(action.choices[getattr(ns, action.dest)]._option_string_actions)
            hints = [did_you_mean(w.split("=", 1)[0], options).strip() for w in extras if w.startswith("-")]
            self.error(f"unrecognized arguments: {' '.join(extras)}" + "".join(f"; {h}" for h in hints if h))
        return ns

    def parse_known_args(self, args=None, namespace=None):
        """A value that starts like a negative number (``-d -5s``) is the option's value, to be checked
        by its type (argparse would take ``-5s`` for an option and say "expected one argument")."""
        argv = list(sys.argv[1:] if args is None else args)
        joined: list[str] = []
        for word in argv:
            if joined and NEGATIVE.match(word) and joined[-1].startswith("-") and "=" not in joined[-1] \
                    and not NEGATIVE.match(joined[-1]):
                joined[-1] = f"{joined[-1]}={word}"
            else:
                joined.append(word)
        return super().parse_known_args(joined, namespace)


NEGATIVE = re.compile(r"-\d")  # a negative number, with or without a unit: -5, -5s, -0.5


def add_processes_threads(p, most_processes: int = 4096, most_threads: int = 4096) -> None:
    """--processes (also -w/--workers, the servers' own word) and --threads (also -t)."""
    p.add_argument("--processes", "-w", "--workers", dest="processes", metavar="N",
                   type=count("--processes", 1, most_processes), help="worker processes (-w, --workers)")
    p.add_argument("--threads", "-t", dest="threads", metavar="N", type=count("--threads", 1, most_threads),
                   help="threads per process")


def add_knobs(p: argparse.ArgumentParser) -> None:
    """The server knobs (catalog.KNOBS) and the server's CPUs."""
    add_processes_threads(p, KNOB_MAX["processes"], KNOB_MAX["threads"])
    p.add_argument("--connections", type=count("--connections", 1, KNOB_MAX["connections"]),
                   help="connection limit (where the server has one)")
    p.add_argument("--cpus", type=cpus, help="CPU list for the server, e.g. 1 or 0-1 (default: all)")


def add_limits(p: argparse.ArgumentParser) -> None:
    """A container's limits on the server's process set (limits.Limits), as docker run's --cpus and
    --memory: the CPU quota over whatever CPUs --cpus allows."""
    p.add_argument("--cpu-limit", type=positive("--cpu-limit", hi=os.cpu_count() or 1, what="a number of cores"),
                   metavar="CORES",
                   help="CPU quota in cores of CPU time per period (0.5, 1.5), as a container's limit")
    p.add_argument("--cpu-period", type=duration("--cpu-period", PERIOD_RANGE_S[1], PERIOD_RANGE_S[0]),
                   metavar="DURATION", help="the quota's CFS period, 1ms to 1s (default 100ms)")
    p.add_argument("--memory-limit", type=size_mib("--memory-limit", container=True), metavar="SIZE",
                   help="memory limit of the server's processes together (512MiB, 1GiB), as a container's")


def overrides_of(args):
    """What run's flags set over the experiment file (plan's Overrides): --share-cpus, and the
    limits (add_limits) on every [[servers]] entry, as the file's keys would."""
    from arena.plan.parse import Overrides  # here: the file's reader only where a file is read

    # typed, as the flags read them (seconds, MiB): the file's reader takes numbers, no text is parsed again
    keys = (("cpu_limit", args.cpu_limit), ("cpu_period", args.cpu_period), ("memory_limit", args.memory_limit))
    limits_of(args)  # refused under the flags' names, before the file reads them as its keys
    return Overrides(args.share_cpus, tuple((k, v) for k, v in keys if v is not None))


def limits_of(args) -> Limits:
    """The limits the flags of add_limits give (--cpu-period alone is refused: it is the quota's; a
    quota the kernel cannot apply as it is, too)."""
    if problem := period_problem(args.cpu_period is not None, args.cpu_limit is not None, "--cpu-limit"):
        raise ArenaError(f"--cpu-period {args.cpu_period * 1000:g}ms: {problem}")
    limits = Limits(args.cpu_limit, args.cpu_period or PERIOD_S, args.memory_limit)
    if limits.cpu is not None and (problem := cpu_problem(limits.cpu, limits.cpu_period_s)):
        raise ArenaError(f"--cpu-limit {limits.cpu:g}: {problem}")
    return limits


def add_user_app(p: argparse.ArgumentParser) -> None:
    """How a user's app (--app config.ru or module:callable) is run."""
    p.add_argument("--chdir", help="a Python app's directory (default: the current one); a Rack app: its config.ru's")
    p.add_argument("--venv", help="a Python environment whose bin/ has the server (default: Arena's)")
    p.add_argument("--interface", choices=("wsgi", "asgi"), help="a Python app's interface (default: the server's only "
                                                                     "one, else found by importing the app)")
    p.add_argument("--health", help="the app's health path, ready when it answers below 400 (default: the measured "
                                    "path where it is a GET, else /); four answers of 400 or more end the wait")
    p.add_argument("--warmup", action="append", default=[], metavar="PATH",
                   help="request this path once after the app is ready (repeatable)")
    p.add_argument("--ready-timeout", type=duration("--ready-timeout", 3600),
                   help="how long the app may take to get ready (default: the server's)")


def assignment(flag: str):
    """NAME=VALUE (repeatable flags: --set, --env)."""
    def parse(text: str) -> tuple[str, str]:
        name, eq, value = text.partition("=")
        if not eq or not name:
            raise argparse.ArgumentTypeError(f"must be NAME=VALUE, got '{text}'")
        return name, value

    parse.__name__ = flag
    return parse


def add_settings(p: argparse.ArgumentParser) -> None:
    """A server's named settings, declared variables and raw flags (as an experiment's options)."""
    p.add_argument("--set", type=assignment("--set"), action="append", default=[], metavar="NAME=VALUE",
                   dest="settings", help="a server setting: preload=true, yjit=true, keepalive_timeout=5 ... "
                                         "(`arena servers` lists each server's; repeatable)")
    p.add_argument("--env", type=assignment("--env"), action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for the server's environment (repeatable)")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG", dest="server_args",
                   help="a raw flag appended to the server's command, e.g. --server-arg=--backlog=64 (repeatable)")


def settings_options(args) -> dict:
    """The ServerSpec fields of ``add_settings``' flags; a declared variable checked as in experiments."""
    from arena.servers.launch import env_problem  # here: a command that starts no server imports no launcher

    for name, value in args.env:
        if env_problem(name, value):
            raise ArenaError(f"--env {name}={value}: {env_problem(name, value)}")
    return dict(settings=dict(args.settings), env=dict(args.env), options=tuple(args.server_args))


def topology_option(given: list[tuple[str, str]], server: str):
    """``--topology KEY=VALUE`` flags -> a Topology, checked as an experiment's [topology] is."""
    from arena.topology import parse_value, topology

    try:
        return topology({k: parse_value(v) for k, v in given}, catalog.CATALOG.get(server), catalog.unix_servers())
    except ArenaError as e:
        key, _, why = str(e).partition(": ")
        raise ArenaError(f"--topology {key}={dict(given).get(key, '')}: {why}") from None


def add_share(p) -> None:
    p.add_argument("--share-cpus", action="store_true",
                   help="let the server and the load generator share CPUs knowingly (a one-CPU machine; the file's "
                        "[layout] share = true): every run is marked, its figures include the generator's cost")


def user_app_options(args) -> dict:
    return dict(chdir=args.chdir, venv=args.venv, interface=args.interface, health=args.health,
                warmup=args.warmup, ready_timeout_s=args.ready_timeout)


STORE_ENV = "ARENA_STORE"


def add_store(p: argparse.ArgumentParser) -> None:
    """--store: the results store; by default $ARENA_STORE where it is set, else the arena.db of the
    current directory or the nearest parent that has one (as git finds its repository), else arena.db
    here (the one rule every command follows)."""
    import os

    p.add_argument("--store", default=os.environ.get(STORE_ENV) or default_store(),
                   help=f"results store (default: ${STORE_ENV} if set, else arena.db in this directory or the nearest "
                        "parent that has one, else arena.db here)")


def say_store(out, path: str) -> None:
    """The line a command that read a store prints first in its text output: which store (found by
    the one location rule of add_store), so a command run from elsewhere never reads another unseen."""
    import os

    out.print(f"store {os.path.abspath(path)}", highlight=False, markup=False, style="dim")


def default_store(start: str | None = None) -> str:
    """arena.db in ``start`` (the current directory) or its nearest parent that has one, else "arena.db"."""
    from pathlib import Path

    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "arena.db").is_file():
            return str(d / "arena.db") if d != here else "arena.db"
    return "arena.db"


def add_format(p, command: str, notes: str = "") -> None:
    """``--format`` among the command's formats (report/formats/: the registry; text by default) and
    ``--json``, the same as ``--format json``: every command that prints data takes both."""
    from arena.report.formats import formats, schema, what

    how = p.add_mutually_exclusive_group()
    offered = formats(command)
    how.add_argument("--format", choices=offered, default="text",
                     help="; ".join(f"{f}: {what(f)}" + (f" ({schema(command)})" if f == "json" else "")
                                    for f in offered) + (f" ({notes})" if notes else ""))
    how.add_argument("--json", dest="format", action="store_const", const="json",
                     help=f"the same as --format json ({schema(command)})")


def saying(out, args):
    """Where a command says what it does as it goes: ``out``, or standard error where its output is a
    JSON document (--json), which stands alone on standard output."""
    if args.format != "json":
        return out
    from rich.console import Console

    return Console(stderr=True, width=out.width)


def print_json(doc) -> None:
    """A command's --json document, alone on standard output."""
    import json

    sys.stdout.write(json.dumps(doc, indent=1) + "\n")


def latency_ms(flag: str):
    """A latency limit: ``200ms``, ``0.2s``, or a plain number of milliseconds -> ms."""
    from arena.plan.reader import parse_duration

    def parse(text: str) -> float:
        plain = re.fullmatch(r"[0-9]*\.?[0-9]+", text.strip())
        seconds = float(text) / 1000 if plain else parse_duration(text)
        if seconds is None or not 0 < seconds <= 3600:
            raise argparse.ArgumentTypeError(f"must be a latency such as 200ms, 0.5s or 200 (ms), above 0 and at most "
                                             f"1h, got '{text}'")
        return seconds * 1000

    parse.__name__ = flag
    return parse


def size_mib(flag: str, container: bool = False):
    """A memory size: ``512MiB``, ``1.5GiB``, ``800M``, or a plain number of MiB -> MiB (``container``:
    a container's limit, at least the smallest a container runtime sets)."""
    from arena.plan.reader import parse_size_mib

    def parse(text: str) -> float:
        plain = re.fullmatch(r"[0-9]*\.?[0-9]+", text.strip())
        value = float(text) if plain else parse_size_mib(text)
        if value is None or not 0 < value <= 1 << 30:
            raise argparse.ArgumentTypeError(f"must be a size such as 512MiB, 2GiB or 512 (MiB), above 0, got '{text}'")
        if container and (problem := memory_problem(value)):
            raise argparse.ArgumentTypeError(f"'{text}' {problem}")
        return value

    parse.__name__ = flag
    return parse


def add_goal(p: argparse.ArgumentParser, required: bool = False) -> None:
    """The limits over the experiment's [goal]."""
    p.add_argument("--p99-max", type=latency_ms("--p99-max"), metavar="LATENCY", required=required,
                   help="latency target: p99 at most this (200ms, 0.5s; a plain number is ms)"
                        + ("" if required else " (default: the experiment's [goal] p99_max)"))
    p.add_argument("--memory-max", type=size_mib("--memory-max"), metavar="SIZE",
                   help="memory budget: PSS at most this (512MiB, 2GiB; a plain number is MiB)"
                        + ("" if required else " (default: [goal] memory_max)"))
    p.add_argument("--error-max", type=positive("--error-max", zero=True, hi=100), metavar="PCT",
                   help="errors at most PCT%% of the requests" + ("" if required else " (default: [goal] error_max)"))


def goal_flags(args):
    """The goal add_goal's flags give."""
    from arena.app.analysis import GoalFlags

    return GoalFlags(args.p99_max, args.memory_max, args.error_max)


def reap_first(out) -> None:
    """Before a command starts anything: remove what dead Arena processes left, and say so."""
    from arena.app.reap import reap_stale

    for item in reap_stale():
        out.print(f"reaped {item} (left by an Arena process that is gone)", highlight=False, markup=False)


def write(path: str, text: str, flag: str) -> None:
    """Write a file the user named, whole or not at all (arena.atomic); a failure is a one-line error
    naming the flag."""
    write_file(path, text, flag)


def note_unused_environment(out) -> None:
    """Before servers start: say which knob variables of the caller's shell they will not see."""
    import os

    from arena.app.servers import unused_environment

    for u in unused_environment(dict(os.environ)):
        how = (f"give {u.knob} = {u.value} in the experiment, or --{u.knob} {u.value}" if u.knob
               else "give the setting in the experiment (a server's settings, or its env table), or --env")
        out.print(f"note: {u.variable}={u.value} in your environment is not passed to the servers (each gets exactly "
                  f"the environment its configuration declares): {how}, for {', '.join(u.servers)}",
                  highlight=False, markup=False)


def warn(out, app) -> None:
    """Print what a user's app warns of (subjects.user.UserApp.warnings), once per line."""
    for line in getattr(getattr(app, "user", None), "warnings", ()):
        out.print(f"warning: {line}", highlight=False, markup=False)
