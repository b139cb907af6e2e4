"""Process sets: every backend must track a daemonized process, account CPU, freeze and kill all."""

import os
import select
import signal
import subprocess
import sys

import psutil
import pytest

from arena import cpus as cpu_lists
from arena.errors import ArenaError
from arena.servers import cgroup

# Daemonizes a grandchild out of its tree (setsid + double fork, as Passenger's watchdog does),
# burns 0.2 s of CPU, prints the daemon's pid, then a heartbeat line every 10 ms.
TREE = r"""
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, b"%d\n" % os.getpid())
        while True:
            time.sleep(1)
    os._exit(0)
os.wait()
daemon = os.read(r, 100).strip()
end = time.thread_time() + 0.2
while time.thread_time() < end:
    pass
os.write(1, daemon + b"\n")
while True:
    os.write(1, b"beat\n")
    time.sleep(0.01)
"""


def usable(backend: str) -> bool:
    if backend == "v1":
        roots = cgroup.v1_roots()
        return {"cpuset", "cpuacct", "freezer"} <= roots.keys() and all(os.access(p, os.W_OK) for p in roots.values())
    if backend == "v2":
        root = cgroup.v2_root()
        return root is not None and os.access(root, os.W_OK)
    return True


@pytest.fixture(params=["v1", "v2", "none"])
def procset(request):
    if not usable(request.param):
        pytest.skip(f"cgroup {request.param} is not available here")
    ps = cgroup.create("test", cpus=[0], backend=request.param)
    yield ps
    ps.kill_all()
    ps.remove()


def read_available(fd: int, wait: float) -> bytes:
    """Whatever arrives on ``fd`` within ``wait`` seconds of silence."""
    data = b""
    while select.select([fd], [], [], wait)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
        wait = 0.0
    return data


@pytest.mark.integration
def test_a_set_tracks_accounts_freezes_and_kills_a_daemonized_tree(procset):
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, preexec_fn=procset.preexec(),
                            env={**os.environ, **procset.env()}, start_new_session=True)
    try:
        fd = proc.stdout.fileno()
        daemon = int(os.read(fd, 64).split(b"\n")[0])
        # the daemon left the launcher's process tree, but not the set
        assert daemon not in [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        assert {proc.pid, daemon} <= set(procset.pids())
        assert os.sched_getaffinity(daemon) == {0}

        user, system = procset.cpu_times()
        assert user + system >= 0.19

        procset.freeze()
        read_available(fd, 0.0)  # lines written before the freeze took hold
        assert read_available(fd, 0.3) == b"", "a frozen process wrote output"
        procset.thaw()
        assert b"beat" in read_available(fd, 5.0)

        procset.kill_all()
        assert procset.pids() == [] and cgroup.survivors(procset.name) == []
        assert proc.wait(timeout=5) == -signal.SIGKILL
        assert not psutil.pid_exists(daemon) or psutil.Process(daemon).status() == psutil.STATUS_ZOMBIE
    finally:
        proc.kill()
        proc.wait()


BUSY = "import time\nend = time.monotonic() + 1.0\nwhile time.monotonic() < end:\n    pass\n"


@pytest.mark.alone
def test_a_cpu_quota_holds_a_busy_loop_to_its_share_and_counts_its_throttling(procset):
    """A busy loop of 1 s under a 0.5-core quota (on both CPUs, as a pod on a node) gets 45-55% of
    a core, and the cgroup counts the periods it waited for the next one; without a cgroup the
    quota is refused in one line."""
    from arena.limits import Limits

    if isinstance(procset, cgroup.ProcessTree):
        with pytest.raises(ArenaError, match=r"^cpu_limit = 0.5: needs a cgroup controller"):
            procset.limit(Limits(cpu=0.5))
        procset.limit(Limits())  # no limit asked: nothing to refuse
        return
    if isinstance(procset, cgroup.CgroupV2) and not (procset.dir / "cpu.max").exists():  # a hybrid's bare v2
        with pytest.raises(ArenaError, match=r"^cpu_limit = 0.5: the cgroup v2 cpu controller is not enabled"):
            procset.limit(Limits(cpu=0.5))
        return
    procset.cpus = None  # both CPUs: the quota, not the cpuset, holds it
    procset.limit(Limits(cpu=0.5))
    before = procset.throttling()
    busy = subprocess.run([sys.executable, "-c", BUSY], preexec_fn=procset.preexec(), timeout=30)
    assert busy.returncode == 0
    user, system = procset.cpu_times()
    used = procset.throttling() - before
    assert 0.45 <= user + system <= 0.55 + 0.05, (user, system)  # 1 s of wall time, plus the interpreter's start
    assert used.periods >= 9 and used.throttled_periods >= 5 and used.throttled_s > 0.2, used


def test_a_memory_limit_is_the_groups_and_its_text_the_configurations():
    """memory_limit is written to the group's limit, a process past it is killed and the group counts
    the kill; Limits name themselves as the configuration's name shows them."""
    from arena.limits import Limits

    assert Limits(cpu=0.5, memory_mib=256).text == "cpu=0.5 mem=256MiB"
    assert Limits(cpu=1.5, cpu_period_s=0.05, memory_mib=1536).text == "cpu=1.5/50ms mem=1.5GiB"
    assert Limits().text == "" and not Limits().any and Limits(cpu=0.5).quota_us == 50_000
    if not usable("v1") or "memory" not in cgroup.v1_roots():
        pytest.skip("needs writable cgroup v1 with its memory controller")
    ps = cgroup.create("test", cpus=None, backend="v1")
    try:
        ps.limit(Limits(memory_mib=120))
        assert int((ps.dirs["memory"] / "memory.limit_in_bytes").read_text()) == 120 * 2**20
        before = ps.memory_events()
        if before is None:
            pytest.skip("this kernel's v1 memory.oom_control counts no oom_kill (before Linux 4.13)")
        # a process that keeps 200 MiB, written, is killed at the limit; the group counts it
        grow = subprocess.run([sys.executable, "-c", "kept = [b'x' * 2**20 for _ in range(200)]"],
                              preexec_fn=ps.preexec(), timeout=30)
        assert grow.returncode == -signal.SIGKILL
        assert (ps.memory_events() - before).oom_kills == 1
        assert 115 * 2**20 <= ps.memory_peak() <= 120 * 2**20
    finally:
        ps.remove()


def test_a_quota_below_the_kernels_smallest_is_refused_and_what_is_stored_is_read_back(procset):
    """Limits the kernel cannot apply as asked (a quota under 1 ms a period) are refused in one line
    with the smallest it can apply, never lifted to it; those it can are returned as the cgroup holds
    them, read back after they are set (whole microseconds of quota, whole pages of memory): what a
    run stores."""
    from arena.limits import Limits, cpu_problem

    assert cpu_problem(0.5, 0.001) and cpu_problem(0.0001, 0.1) and cpu_problem(1, 0.001) is None
    for asked in (Limits(cpu=0.5, cpu_period_s=0.001), Limits(cpu=0.0001)):
        with pytest.raises(ArenaError, match=r"^cpu_limit = .*below the kernel's smallest quota of 1 ms a period: at "
                                             r"least [0-9.]+ cores with this period$"):
            procset.limit(asked)
    if isinstance(procset, cgroup.ProcessTree) or isinstance(procset, cgroup.CgroupV2) and not all(
            (procset.dir / f"{c}.max").exists() for c in ("cpu", "memory")):
        return  # no controller to read back (refused as the test above shows)
    held = procset.limit(Limits(cpu=1 / 3, memory_mib=100.0005))
    if isinstance(procset, cgroup.CgroupV1):
        quota = int((procset.dirs["cpu"] / "cpu.cfs_quota_us").read_text())
        period = int((procset.dirs["cpu"] / "cpu.cfs_period_us").read_text())
        memory = int((procset.dirs["memory"] / "memory.limit_in_bytes").read_text())
    else:
        quota, period = map(int, (procset.dir / "cpu.max").read_text().split())
        memory = int((procset.dir / "memory.max").read_text())
    assert (quota, period, memory) == (33_333, 100_000, 100 * 2**20)  # rounded to a microsecond, to a page
    assert held == Limits(cpu=0.33333, cpu_period_s=0.1, memory_mib=100.0)


def test_remove_deletes_the_group(procset):
    procset.remove()
    if isinstance(procset, cgroup.CgroupV1):
        assert not any(d.exists() for d in procset.dirs.values())
    elif isinstance(procset, cgroup.CgroupV2):
        assert not procset.dir.exists()


@pytest.mark.skipif(not usable("v1"), reason="needs writable cgroup v1")
def test_stale_groups_of_a_dead_owner_are_reaped():
    # A group named after an owner pid that does not exist, holding a live process.
    dead_owner = 2**22 + 777  # beyond pid_max: never a live pid
    ps = cgroup.CgroupV1(f"{cgroup.PREFIX}{dead_owner}-1-test", None, cgroup.v1_roots())
    proc = subprocess.Popen(["sleep", "60"], preexec_fn=ps.preexec())
    try:
        assert ps.pids() == [proc.pid]
        reaped = cgroup.reap_stale()
        assert any(ps.name in r for r in reaped)
        assert proc.wait(timeout=5) == -signal.SIGKILL
        assert not any(d.exists() for d in ps.dirs.values())
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("text, cpus", [("0", [0]), ("0-1", [0, 1]), ("1,0", [0, 1]), (" 0 ", [0])])
def test_parse_cpu_list(text, cpus):
    if not set(cpus) <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0-1")
    assert cpu_lists.parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text, message", [
    ("a", "--cpus: must be a CPU list such as 0 or 0-1,3, got 'a'"),
    ("3-1", "--cpus: must be a CPU list such as 0 or 0-1,3, got '3-1'"),
    ("4096", "--cpus: CPU 4096 is not available, got '4096' (available: "),
])
def test_parse_cpu_list_errors(text, message):
    with pytest.raises(ArenaError) as e:
        cpu_lists.parse_cpu_list(text)
    assert str(e.value).startswith(message)


def test_format_cpu_list():
    assert cpu_lists.format_cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpu_lists.format_cpu_list([3]) == "3"


def test_backend_choice_is_validated():
    with pytest.raises(ArenaError, match="^ARENA_CGROUP: must be one of auto, v1, v2, none, got 'v3'"):
        cgroup.choose_backend("v3")


def test_only_arenas_own_names_of_dead_owners_are_stale():
    dead = 2**22 + 5  # beyond pid_max
    assert cgroup.stale(f"arena-{dead}-3-puma")
    assert not cgroup.stale(f"arena-{os.getpid()}-3-puma")  # owner alive
    for other in ("arena-load-abc123", "arena-bench-nginx-x", "arena-rails", f"arena-{dead}", "puma-1-2-x"):
        assert not cgroup.stale(other), other


def test_stale_workdir_reaping_touches_only_dead_owners_dirs(tmp_path):
    from arena.servers.launch import KEEP_MARK, reap_stale_workdirs

    dead = 2**22 + 5
    gone = tmp_path / f"arena-{dead}-1-puma-abc"
    kept_log = tmp_path / f"arena-{dead}-2-puma-def"
    mine = tmp_path / f"arena-{os.getpid()}-1-puma-ghi"
    other = tmp_path / "arena-load-jkl"  # another tool's temp dir, e.g. a running arena-load's result
    for d in (gone, kept_log, mine, other):
        d.mkdir()
    (kept_log / KEEP_MARK).touch()
    assert reap_stale_workdirs(tmp_path) == [gone]
    assert not gone.exists() and kept_log.exists() and mine.exists() and other.exists()
    # a failed start's log is kept a week, or until asked (arena reap --logs); only a dead owner's
    import time

    from arena.servers.launch import KEEP_LOGS_S

    assert reap_stale_workdirs(tmp_path, now=time.time() + KEEP_LOGS_S - 60) == []
    assert reap_stale_workdirs(tmp_path, now=time.time() + KEEP_LOGS_S + 60) == [kept_log]
    kept_log.mkdir()
    (kept_log / KEEP_MARK).touch()
    (mine / KEEP_MARK).touch()
    assert reap_stale_workdirs(tmp_path, logs=True) == [kept_log] and mine.exists()


def test_an_exact_cpu_total_is_split_in_the_sampled_proportion():
    from arena.servers.cgroup import split_cpu

    assert split_cpu(0.4, 38, 2) == pytest.approx((0.38, 0.02))  # 0.396 in ticks, 0.4 exactly
    assert split_cpu(1.0, 0, 0) == (1.0, 0.0)
    assert sum(split_cpu(0.123456, 7, 3)) == pytest.approx(0.123456)
