"""What dead Arena processes left behind, found and removed: ``arena reap``, and the first step of
every command that starts something. And this process's own leftovers on the way out."""

from __future__ import annotations

import contextlib
import signal
import sys

from arena.servers.cgroup import OWNED, issued_since, reap_groups

LAUNCHER = "arena.servers.launch"  # imported where something is started: show, report or export never do


def reap_stale(logs: bool = False) -> list[str]:
    """Processes, groups, work dirs and drivers' temp dirs of Arena processes that are gone; the
    logs of their failed starts after a week, or all of them with ``logs``."""
    from arena.servers.launch import reap

    return reap(logs)


@contextlib.contextmanager
def _shielded():
    """SIGINT and SIGTERM do nothing while cleaning up on the way out (Arena is already stopping)."""
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, signal.SIG_IGN)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def mark() -> int:
    """A point to reap back to: what this process creates from now on is reap_own(mark)'s."""
    return len(issued_since(0))


def reap_own(since: int = 0) -> list[str]:
    """Stop every server this process still runs, then remove whatever it created since ``since``
    that is still there (a second Ctrl-C in the middle of a stop leaves a group or a dir behind)."""
    with _shielded():
        launcher = sys.modules.get(LAUNCHER)
        if launcher is not None:  # where it was never imported, this process started nothing
            launcher.stop_all()
        owners = {m.group(0) for m in map(OWNED.match, issued_since(since)) if m}  # "arena-<pid>-<seq>-"
        if not owners:
            return []

        def mine(name: str) -> bool:  # a group is named so; its work dir and temp dirs start so
            m = OWNED.match(name)
            return m is not None and m.group(0) in owners

        from arena.servers.launch import reap_stale_workdirs

        return reap_groups(mine) + [str(d) for d in reap_stale_workdirs(doomed=mine)]
