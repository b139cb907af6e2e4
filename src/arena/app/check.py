"""``arena check``: start each server with each app it serves, run the conformance requests, stop.

A combination passes when the server started, every conformance check held, and after the stop
no process of it was left and its port was free again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from arena.errors import ArenaError
from arena.limits import Limits
from arena.services import started_services
from arena.http_client import port_free
from arena.probe import sample_once
from arena.servers import catalog
from arena.servers.cgroup import survivors
from arena.servers.launch import ServerSpec, known_version, start
from arena.subjects import App, conformance
from arena.subjects.user import app_for, venv_dir


@dataclass
class CheckResult:
    server: str
    app: str
    status: str  # "pass" | "fail" | "skip"
    version: str | None = None
    knobs: dict[str, int | None] = field(default_factory=dict)
    startup_s: float | None = None
    pss_bytes: int | None = None
    processes: int | None = None
    problems: list[str] = field(default_factory=list)
    app_warnings: tuple[str, ...] = ()  # what the user's app warns of (UserApp.warnings)
    stream: str | None = None  # a built-in app's /stream as the server delivered it (conformance.delivery)


def plan(servers: Iterable[str] | None, apps: Iterable[str] | None,
         user: Mapping[str, Any] | None = None) -> list[tuple[str, str | App]]:
    """(server, app) pairs to check; unknown names are errors, pairs that cannot exist are left out.
    An app that is not a built-in one is a user's (subjects.user.app_for, with the ``user`` options),
    checked with every server that serves its interface."""
    return planned(servers, apps, user)[0]


def planned(servers: Iterable[str] | None, apps: Iterable[str] | None, user: Mapping[str, Any] | None = None
            ) -> tuple[list[tuple[str, str | App]], list[CheckResult]]:
    """plan's pairs, and a skip for each server asked by name that serves none of the apps asked
    (with why: the interfaces or apps it serves), so none is left out unsaid."""
    entries = [catalog.get_server(name) for name in (servers or catalog.CATALOG)]
    wanted = list(apps) if apps else None
    venv = (user or {}).get("venv")
    if venv and not servers:  # a --venv's own servers only (those named are checked, or skipped with why)
        bin_dir = Path(venv_dir(Path.cwd(), venv)) / "bin"
        entries = [e for e in entries if e.language == "python" and catalog.available(e, bin_dir)]
    names = [e.name for e in entries]
    # each app resolved once, against every interface the servers serve (a Python app needs
    # --interface only where both wsgi and asgi servers are checked)
    serves = {i for e in entries for i in e.interfaces}
    resolved = [app_for(a, serves, **(user or {})) for a in wanted or ()]
    pairs: list[tuple[str, str | App]] = []
    left: list[CheckResult] = []
    for entry in entries:
        for app in resolved if wanted else entry.apps:
            if isinstance(app, App) and app.interface in entry.interfaces or app in entry.apps:
                pairs.append((entry.name, app))
            elif servers:
                why = (f"serves {'/'.join(entry.interfaces)} apps, and {app.name} is a {app.interface} app"
                       if isinstance(app, App) else f"does not serve {app} (its apps: {', '.join(entry.apps)})")
                left.append(CheckResult(entry.name, app.name if isinstance(app, App) else app, "skip",
                                        problems=[f"left out: {entry.name} {why}"]))
    if not pairs:
        raise ArenaError(f"--app: none of {', '.join(names)} serves {', '.join(wanted or [])}")
    return pairs, left


def check_one(server: str, app: str | App, processes: int | None = None, threads: int | None = None,
              cpus: list[int] | None = None, env: dict[str, str] | None = None,
              services: Iterable[str] = (), limits: Limits = Limits()) -> CheckResult:
    """A built-in app: the subject contract's conformance requests; a user's app: its health path
    answered with Arena's timing (conformance.wrapped)."""
    entry = catalog.get_server(server)
    name = app.name if isinstance(app, App) else app
    bin_dir = app.user.bin_dir if isinstance(app, App) and app.user else None
    if not catalog.available(entry, bin_dir):
        where = f"in {bin_dir.parent}" if bin_dir else f"here: {entry.install_hint}"
        return CheckResult(server, name, "skip", problems=[f"not installed {where}"])
    spec = ServerSpec(server, app, processes=processes, threads=threads, cpus=cpus, strict_knobs=False, env=env or {},
                      limits=limits)
    try:
        running = start(spec)
    except ArenaError as e:
        return CheckResult(server, name, "fail", version=known_version(entry, app)[0], problems=[str(e).splitlines()[0]])
    result = CheckResult(server, name, "pass", running.version, running.knobs, running.startup_s)
    with running:
        if isinstance(app, App):
            failures = conformance.wrapped(running.host, running.port, app.health, pids=running.procset.pids)
        else:
            def delivered(reply) -> None:
                result.stream = conformance.delivery(reply)

            failures = conformance.run(running.host, running.port, app, server=server, pids=running.procset.pids,
                                       services=services, on_stream=delivered)
        result.problems += [str(f) for f in failures]
        sample = sample_once(running.procset)
        result.pss_bytes, result.processes = sample.pss, sample.processes
    if running.killed:
        result.problems.append(f"stop: {len(running.killed)} processes ignored {running.server.stop_signal.name} "
                               f"for {running.server.grace_s:.0f} s and were killed")
    left = survivors(running.procset.name)
    if left:
        result.problems.append(f"stop: processes {left} were left running")
    if not port_free(running.host, running.port):
        result.problems.append(f"stop: port {running.port} is still taken")
    if result.problems:
        result.status = "fail"
    return result


def check(servers: Iterable[str] | None = None, apps: Iterable[str] | None = None, *,
          user: Mapping[str, Any] | None = None,
          processes: int | None = None, threads: int | None = None, cpus: list[int] | None = None,
          limits: Limits = Limits(), services: Iterable[str] = (),
          on_result: Callable[[CheckResult], None] = lambda r: None,
          on_service: Callable[[object], None] = lambda s: None) -> list[CheckResult]:
    """Every pair of ``plan``, with the ``services`` (kinds, default settings) started first and
    stopped after."""
    pairs, results = planned(servers, apps, user)
    for skipped in results:  # said first: nothing asked is left out unsaid
        on_result(skipped)
    with started_services(services, cpus, on_service) as env:
        for server, app in pairs:
            result = check_one(server, app, processes, threads, cpus, env, services, limits)
            result.app_warnings = app.user.warnings if isinstance(app, App) and app.user else ()
            on_result(result)
            results.append(result)
    return results
