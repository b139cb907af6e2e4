"""Ctrl-C, SIGTERM and SIGKILL to a real `arena run` of a clustered Puma: the exit status says what
happened, and nothing is left behind (no process, cgroup, work dir or load generator's temp dir),
whether Arena stopped itself or a later Arena reaped what a killed one left."""

import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import psutil
import pytest

from arena.servers import cgroup
from tests.conftest import require_server

EXPERIMENT = """
name = "signals"
duration = "3s"
warmup = "0s"
repetitions = 3
[workload]
path = "/work?cpu_ms=2"
[load]
concurrency = [2]
[[servers]]
server = "puma"
processes = 2
threads = 2
"""


def leftovers_of(pid: int) -> list[str]:
    """Whatever Arena process ``pid`` owned that still exists: groups, dirs, processes."""
    mark = f"{cgroup.PREFIX}{pid}-"
    roots = set(cgroup.v1_roots().values()) | ({cgroup.v2_root()} - {None})
    found = [str(d) for r in roots for d in r.glob(f"{mark}*")]
    found += [str(d) for d in Path(tempfile.gettempdir()).glob(f"{mark}*")]
    found += [f"pid {p}" for p in cgroup.tagged_pids(f"{cgroup.ProcessTree.TAG}={mark}".encode())]
    return found


# `python -m arena` with a SIGUSR2 that writes where each of its threads is to $ARENA_TEST_STACKS and
# goes on (wait_for_load's evidence while it waits)
BOOT = ("import faulthandler, os, runpy, signal\n"
        "faulthandler.register(signal.SIGUSR2, open(os.environ['ARENA_TEST_STACKS'], 'a'), all_threads=True)\n"
        "runpy.run_module('arena', run_name='__main__', alter_sys=True)")
STACKS_EVERY_S = 20  # while no load has started, its stacks this often
LOAD_WITHIN_S = 120


def start(tmp_path: Path, experiment: str = EXPERIMENT) -> subprocess.Popen:
    exp = tmp_path / "signals.toml"
    exp.write_text(experiment)
    # -X faulthandler: a SIGABRT makes it print where each of its threads is (wait_for_load's evidence)
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", BOOT, "run", str(exp), "--store",
                             str(tmp_path / "s.db")], env={**os.environ, "ARENA_TEST_STACKS": str(tmp_path / "stacks")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    proc.stacks = tmp_path / "stacks"
    return proc


def _stacks(proc: subprocess.Popen) -> str:
    return proc.stacks.read_text() if proc.stacks.exists() else "(none taken)"


def wait_for_load(proc: subprocess.Popen) -> None:
    """Until the first run is under way: Arena has started arena-load (after its server's ready check
    and idle probe). While it has not, where Arena's threads are is taken every STACKS_EVERY_S; where
    the load started late they are said in a warning (once, in a full suite, a start took 60 s; its
    dump at the end showed it in servers.launch.start, past the groups' creation). Where it never
    starts, Arena is stopped, its group with it (a later test must not find it running as a
    neighbour), and the failure says what it was doing: its processes and where its threads were
    (those stacks, and faulthandler's dump at SIGABRT)."""
    began = time.monotonic()
    look = began + STACKS_EVERY_S
    while time.monotonic() < began + LOAD_WITHIN_S and proc.poll() is None:
        try:
            if any(child.name() == "arena-load" for child in psutil.Process(proc.pid).children()):
                if time.monotonic() - began > STACKS_EVERY_S:
                    warnings.warn(f"Arena started its load after {time.monotonic() - began:.0f} s; where it was "
                                  f"every {STACKS_EVERY_S} s:\n{_stacks(proc)}")
                return
        except psutil.NoSuchProcess:
            break
        if time.monotonic() > look:
            proc.send_signal(signal.SIGUSR2)
            look += STACKS_EVERY_S
        time.sleep(0.05)
    try:
        tree = [f"{c.name()} ({c.status()})" for c in psutil.Process(proc.pid).children(recursive=True)]
        state = psutil.Process(proc.pid).status()
    except psutil.NoSuchProcess:
        tree, state = ["(Arena has exited)"], "gone"
    if proc.poll() is None:
        proc.send_signal(signal.SIGABRT)
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        out = "(no output within 10 s of SIGABRT)"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    raise AssertionError(f"Arena never started its load in {LOAD_WITHIN_S} s; exit status {proc.returncode}; it was "
                         f"{state}; its processes: {tree}; where it was every {STACKS_EVERY_S} s:\n{_stacks(proc)}\n"
                         f"it said:\n{out[-4000:]}")


def stopped_under_load(tmp_path, send, experiment: str = EXPERIMENT) -> int:
    """Start a run, let its load begin, ``send(proc)`` signals, and return Arena's exit status once
    it is gone, after checking it left nothing and printed no traceback."""
    require_server("puma")
    proc = start(tmp_path, experiment)
    wait_for_load(proc)
    send(proc)
    out, _ = proc.communicate(timeout=60)
    assert "Traceback" not in out, out
    assert leftovers_of(proc.pid) == []
    return proc.returncode


def test_a_stop_raised_inside_a_weakref_callback_is_kept_not_printed():
    """A second Ctrl-C can land while the garbage collector runs a weakref callback: Python cannot
    raise there and prints "Exception ignored in ..." with a traceback. Arena's hook keeps it silent
    where the stop is recorded (it is acted on later), and prints anything else as Python would."""
    import subprocess
    import sys

    code = """
import gc, sys, weakref
import arena.cli
from arena.errors import ask_to_stop

class Thing:
    pass

def callback(ref):
    raise {kind}

ask_to_stop(KeyboardInterrupt) if {asked} else None
t = Thing()
r = weakref.ref(t, callback)
del t
gc.collect()
print("went on")
"""
    def run(kind: str, asked: bool) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code.format(kind=kind, asked=asked)], capture_output=True,
                              text=True, timeout=60)

    quiet = run("KeyboardInterrupt()", True)
    assert quiet.stdout == "went on\n" and quiet.stderr == ""
    for kind, asked in (("KeyboardInterrupt()", False), ("ValueError('x')", True)):
        loud = run(kind, asked)
        assert loud.stdout == "went on\n" and "Exception ignored in" in loud.stderr, (kind, asked, loud.stderr)


@pytest.mark.integration
def test_repeated_ctrl_c_leaves_nothing_and_exits_130(tmp_path):
    def impatient(proc) -> None:  # five Ctrl-Cs 20-80 ms apart
        for _ in range(5):
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(random.uniform(0.02, 0.08))

    assert stopped_under_load(tmp_path, impatient) == 130


@pytest.mark.integration
def test_ctrl_c_with_a_database_and_an_api_service_leaves_neither(tmp_path):
    with_services = EXPERIMENT.replace("[[servers]]", '[[services]]\nkind = "postgres"\nrows = 100\n'
                                                      '[[services]]\nkind = "http"\n[[servers]]')
    assert stopped_under_load(tmp_path, lambda p: os.killpg(p.pid, signal.SIGINT), with_services) == 130


@pytest.mark.integration
@pytest.mark.parametrize("to_group", [False, True], ids=["arena", "process-group"])
def test_sigterm_exits_143_and_leaves_nothing(tmp_path, to_group):
    # Arena alone, as a service manager does; or Arena and its load generator together, as
    # `kill -TERM -PGID` or a container stop
    send = (lambda p: os.killpg(p.pid, signal.SIGTERM)) if to_group else (lambda p: p.send_signal(signal.SIGTERM))
    assert stopped_under_load(tmp_path, send) == 143


@pytest.mark.integration
def test_a_sigint_at_once_is_not_lost(tmp_path):
    exp = tmp_path / "signals.toml"
    exp.write_text(EXPERIMENT)
    # as a background job: SIGINT is inherited ignored, and Arena must still honour it
    proc = subprocess.Popen([sys.executable, "-m", "arena", "run", str(exp), "--store", str(tmp_path / "s.db")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    time.sleep(0.15)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "Traceback" not in out and leftovers_of(proc.pid) == []


@pytest.mark.integration
def test_what_a_killed_arena_left_is_reaped_by_the_next_command(tmp_path):
    require_server("puma")
    proc = start(tmp_path)
    wait_for_load(proc)
    os.kill(proc.pid, signal.SIGKILL)  # Arena only: its server and load generator are orphaned
    proc.communicate(timeout=30)
    left = leftovers_of(proc.pid)
    assert any("-puma" in x for x in left)  # the server's group (and its processes) outlived Arena
    deadline = time.monotonic() + 10  # the load generator dies with Arena (PR_SET_PDEATHSIG)
    while any(x.endswith("-load") for x in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    reap = subprocess.run([sys.executable, "-m", "arena", "reap"], capture_output=True, text=True, timeout=60)
    assert reap.returncode == 0, reap.stderr
    assert f"{cgroup.PREFIX}{proc.pid}-" in reap.stdout and "removed" in reap.stdout
    assert leftovers_of(proc.pid) == []
    again = subprocess.run([sys.executable, "-m", "arena", "reap"], capture_output=True, text=True, timeout=60)
    assert "nothing left by dead Arena processes" in again.stdout


# alone: any Arena command reaps what every dead Arena left, so a neighbour test's command may reap the
# killed serve's group before the second serve does (it then says it reaped another's, not this one)
@pytest.mark.alone
def test_serve_on_the_port_a_killed_arena_left_taken_reaps_it_first(tmp_path):
    from arena.http_client import free_port

    require_server("puma")
    port = free_port("127.0.0.1")

    def serve() -> tuple[subprocess.Popen, list[str]]:
        proc = subprocess.Popen([sys.executable, "-m", "arena", "serve", "puma", "--port", str(port), "--processes", "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "Ctrl-C stops it" in line or "error" in line:
                break
        return proc, lines

    first, first_lines = serve()
    os.kill(first.pid, signal.SIGKILL)  # its Puma keeps the port
    first.communicate(timeout=30)
    assert "serving" in "".join(first_lines), first_lines
    second, lines = serve()
    try:
        text = "".join(lines)
        assert "reaped /sys/fs/cgroup" in text or "reaped pid" in text, text
        assert f"127.0.0.1:{port}" in text and "serving" in text, text
    finally:
        os.killpg(second.pid, signal.SIGINT)
        out, _ = second.communicate(timeout=60)
    assert second.returncode == 0 and "no process left" in out, (second.returncode, text + out)
    assert leftovers_of(first.pid) == [] and leftovers_of(second.pid) == []


@pytest.mark.integration
@pytest.mark.parametrize("topology", ['{ balancer = "haproxy", instances = 2, upstream = "unix" }',
                                      '{ proxy = "nginx", upstream = "unix" }'], ids=["fleet", "proxy"])
def test_ctrl_c_in_a_deployment_leaves_no_front_instance_or_socket(tmp_path, topology):
    """A fleet behind HAProxy (or Puma behind nginx) on unix sockets: no haproxy, nginx or server
    process, group, socket file or temp dir is left."""
    fleet = EXPERIMENT.replace("threads = 2\n", f"threads = 2\ntopology = {topology}\n")
    assert stopped_under_load(tmp_path, lambda p: os.killpg(p.pid, signal.SIGINT), fleet) == 130
