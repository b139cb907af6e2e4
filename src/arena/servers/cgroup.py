"""Confinement of one server's whole process set: cgroup v1, cgroup v2, or process tracking.

Each server Arena starts gets a fresh group named ``arena-<owner pid>-<seq>-<server>``. The group
is joined between fork and exec, so every process the server ever spawns is in it, daemonized ones
(Passenger's watchdog re-parents to PID 1) included. The group gives exact CPU accounting, a memory
peak, freezing (a clean stall) and a kill of everything. Where no cgroup hierarchy is writable,
``ProcessTree`` tracks processes by an inherited environment tag and pins CPUs with affinity.

Choose with ``ARENA_CGROUP=auto|v1|v2|none`` (default auto: v1 when its controllers are mounted and
writable, else v2, else none).
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import signal
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable

from arena.cpus import format_cpu_list
from arena.errors import ArenaError
from arena.limits import PERIOD_S, Limits, MemoryEvents, MiB, Throttling

PREFIX = "arena-"
BACKENDS = ("auto", "v1", "v2", "none")
V1_CONTROLLERS = ("cpuset", "cpuacct", "cpu", "memory", "pids", "freezer")  # cpu: the CFS quota
_seq = itertools.count(1)


# ---------------------------------------------------------------------- CPU lists


# ---------------------------------------------------------------------- the interface


class ProcessSet(ABC):
    """All processes of one server: how a child joins, what they are, what they used, how to end them."""

    backend = ""

    def __init__(self, name: str, cpus: list[int] | None):
        self.name = name
        self.cpus = cpus

    def preexec(self) -> Callable[[], None]:
        """Run in the child between fork and exec: join the set (and pin CPUs)."""
        cpus = self.cpus
        join = self._join

        def child() -> None:
            join(os.getpid())
            if cpus:
                os.sched_setaffinity(0, cpus)

        return child

    def env(self) -> dict[str, str]:
        """Environment additions for the server (the fallback tracks by an inherited tag)."""
        return {}

    @abstractmethod
    def _join(self, pid: int) -> None: ...

    @abstractmethod
    def pids(self) -> list[int]:
        """Every live process in the set."""

    @abstractmethod
    def cpu_times(self) -> tuple[float, float] | None:
        """Cumulative (user, system) CPU seconds of the set since it was created."""

    def memory_peak(self) -> int | None:
        """Peak memory charged to the set (bytes), where the backend accounts it."""
        return None

    def limit(self, limits: Limits) -> Limits:
        """Apply a container's limits to the set, before anything joins it, and return what the
        cgroup holds, read back (what a run stores); ArenaError naming the controller where this
        backend cannot, or where the kernel holds other limits than asked (beyond its rounding:
        whole microseconds of quota, whole pages of memory)."""
        if limits.problem:
            raise ArenaError(f"{limits.keys}: {limits.problem}")
        if not limits.any:
            return limits
        return self._applied(limits, *self._set_limits(limits))

    def _set_limits(self, limits: Limits) -> tuple[tuple[int, int] | None, int | None]:
        """Write ``limits`` to the group's controllers, read back: ((quota, period) in µs or None, bytes or None)."""
        raise ArenaError(f"{limits.keys}: {NO_CGROUP}")

    def _applied(self, asked: Limits, cpu: tuple[int, int] | None, memory: int | None) -> Limits:
        """The limits read back (``cpu``: the quota and period in microseconds, None: no quota;
        ``memory``: bytes, None: no limit), checked against those ``asked``."""
        held = Limits(None if cpu is None else cpu[0] / cpu[1], PERIOD_S if cpu is None else cpu[1] / 1e6,
                      None if memory is None else memory / MiB)
        if asked.cpu is None:  # the period of no quota is not the run's
            held = Limits(held.cpu, asked.cpu_period_s, held.memory_mib)
        def off(a: float | None, b: float | None) -> bool:
            return (a is None) != (b is None) or a is not None and abs(a - b) > 0.01 * a

        if off(asked.cpu, held.cpu) or off(asked.memory_mib, held.memory_mib) or \
                abs(held.cpu_period_s - asked.cpu_period_s) > 1e-6:
            raise ArenaError(f"{asked.keys}: the cgroup {self.name} holds {held.text or 'no limits'} after they "
                             "were set: the kernel did not apply them as asked")
        return held

    def throttling(self) -> Throttling | None:
        """The CPU quota's throttling so far (cpu.stat), where the backend has a cpu controller."""
        return None

    def cpu_stat(self) -> Path | None:
        """The cpu controller's cpu.stat (its throttled time: v1's throttled_time in ns, v2's
        throttled_usec), which the timing around each request reads under a quota; None: none."""
        return None

    def memory_events(self) -> MemoryEvents | None:
        """The memory limit's events so far (limit reached, OOM kills), where the backend has a
        memory controller that counts them."""
        return None

    @abstractmethod
    def freeze(self) -> None: ...

    @abstractmethod
    def thaw(self) -> None: ...

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL every process until none is left (frozen first where possible: no fork races)."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return
            if time.monotonic() > deadline:
                raise ArenaError(f"{self.name}: processes {pids} survived SIGKILL for {timeout:.0f} s")
            self._kill_round(pids)
            time.sleep(0.02)

    def _kill_round(self, pids: list[int]) -> None:
        for pid in pids:
            _signal(pid, signal.SIGKILL)

    def signal_all(self, sig: int) -> None:
        for pid in self.pids():
            _signal(pid, sig)

    @abstractmethod
    def remove(self) -> None:
        """Delete the (empty) group."""


NO_CGROUP = ("needs a cgroup controller, and Arena confines servers by process tracking here "
             "(no writable cgroup hierarchy)")


def _v1_missing(controller: str) -> str:
    return f"the cgroup v1 {controller} controller is not mounted here (no {controller} in /proc/self/mounts)"


def _v2_missing(controller: str) -> str:
    return f"the cgroup v2 {controller} controller is not enabled for Arena's groups (cgroup.controllers)"


def _wanted(limits: Limits) -> list[str]:
    """The controllers ``limits`` need."""
    return [c for c, v in (("cpu", limits.cpu), ("memory", limits.memory_mib)) if v is not None]


def limits_problem(limits: Limits, backend: str | None = None) -> str | None:
    """Why this machine cannot set ``limits`` on a server's group (None: it can), said before any
    server starts: the controller the chosen backend lacks."""
    chosen = choose_backend(backend) if limits.any else None
    if chosen == "v1":
        missing = [c for c in _wanted(limits) if c not in v1_roots()]
        return _v1_missing(missing[0]) if missing else None
    if chosen == "v2":
        root = v2_root()
        available = set(_read(root / "cgroup.controllers").split()) if root is not None else set()
        missing = [c for c in _wanted(limits) if c not in available]
        return _v2_missing(missing[0]) if missing else None
    return NO_CGROUP if chosen == "none" else None


def split_cpu(total: float, user: int, system: int) -> tuple[float, float]:
    """An exact CPU total split into (user, system) in the proportion of sampled counts."""
    if user + system <= 0:
        return total, 0.0
    u = total * user / (user + system)
    return u, total - u


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _read(path: Path) -> str:
    return path.read_text()


def _keyed(path: Path) -> dict[str, str]:
    """A cgroup's flat keyed file (cpu.stat, cpuacct.stat: a "key value" line each) as a dict."""
    return dict(line.split() for line in _read(path).splitlines())


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _rmdir(path: Path) -> None:
    for _ in range(100):  # a group whose last task just exited can be busy for a moment
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            time.sleep(0.01)
    path.rmdir()


def _procs(path: Path) -> list[int]:
    try:
        return [int(line) for line in _read(path / "cgroup.procs").split()]
    except FileNotFoundError:
        return []


# ---------------------------------------------------------------------- mounts


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of every cgroup mount."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _dev, point, fstype, opts, *_ = line.split()
        if fstype in ("cgroup", "cgroup2"):
            out.append((point, fstype, set(opts.split(","))))
    return out


def v1_roots() -> dict[str, Path]:
    """Controller -> mount point, for the v1 controllers Arena uses."""
    roots = {}
    for point, fstype, opts in _mounts():
        if fstype == "cgroup":
            for c in V1_CONTROLLERS:
                if c in opts:
                    roots[c] = Path(point)
    return roots


def v2_root() -> Path | None:
    for point, fstype, _opts in _mounts():
        if fstype == "cgroup2":
            return Path(point)
    return None


# ---------------------------------------------------------------------- cgroup v1


class CgroupV1(ProcessSet):
    backend = "cgroup-v1"

    def __init__(self, name: str, cpus: list[int] | None, roots: dict[str, Path]):
        super().__init__(name, cpus)
        self.dirs = {c: roots[c] / name for c in roots}
        self.made: list[Path] = []  # each hierarchy's dir once (cpu and cpuacct are often mounted together)
        try:
            for d in dict.fromkeys(self.dirs.values()):
                d.mkdir()
                self.made.append(d)
            if "cpuset" in self.dirs:  # a cpuset must have cpus and mems before a task can join
                d, parent = self.dirs["cpuset"], roots["cpuset"]
                _write(d / "cpuset.cpus", format_cpu_list(cpus) if cpus else _read(parent / "cpuset.cpus").strip())
                _write(d / "cpuset.mems", _read(parent / "cpuset.mems").strip())
        except BaseException:
            self.remove()
            raise

    def _join(self, pid: int) -> None:
        for d in self.made:
            _write(d / "cgroup.procs", str(pid))

    def _set_limits(self, limits: Limits) -> tuple[tuple[int, int] | None, int | None]:
        missing = [c for c in _wanted(limits) if c not in self.dirs]
        if missing:
            raise ArenaError(f"{limits.keys}: {_v1_missing(missing[0])}")
        if limits.cpu is not None:
            _write(self.dirs["cpu"] / "cpu.cfs_period_us", str(limits.period_us))
            _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(limits.quota_us))
        if limits.memory_mib is not None:  # and no swap beyond it, as on a Kubernetes node
            _write(self.dirs["memory"] / "memory.limit_in_bytes", str(limits.memory_bytes))
            if (self.dirs["memory"] / "memory.memsw.limit_in_bytes").exists():
                _write(self.dirs["memory"] / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
        cpu = memory = None
        if limits.cpu is not None:
            quota = int(_read(self.dirs["cpu"] / "cpu.cfs_quota_us"))
            cpu = None if quota < 0 else (quota, int(_read(self.dirs["cpu"] / "cpu.cfs_period_us")))
        if limits.memory_mib is not None:
            memory = int(_read(self.dirs["memory"] / "memory.limit_in_bytes"))
        return cpu, memory

    def cpu_stat(self) -> Path | None:
        d = self.dirs.get("cpu")
        return None if d is None else d / "cpu.stat"

    def throttling(self) -> Throttling | None:
        d = self.dirs.get("cpu")
        if d is None:
            return None
        stat = _keyed(d / "cpu.stat")
        return Throttling(int(stat["nr_periods"]), int(stat["nr_throttled"]), int(stat["throttled_time"]) / 1e9)

    def memory_events(self) -> MemoryEvents | None:
        d = self.dirs.get("memory")
        if d is None:
            return None
        kills = _keyed(d / "memory.oom_control").get("oom_kill")  # since Linux 4.13
        return MemoryEvents(int(_read(d / "memory.failcnt")), int(kills)) if kills is not None else None

    def pids(self) -> list[int]:
        d = self.dirs.get("freezer") or self.dirs.get("pids") or next(iter(self.dirs.values()))
        return _procs(d)

    def cpu_times(self) -> tuple[float, float] | None:
        d = self.dirs.get("cpuacct")
        if d is None:
            return None
        # cpuacct.usage is the scheduler's exact runtime (ns); the user/system split (usage_user,
        # usage_sys, cpuacct.stat) is sampled at ticks and can miss a whole tick of a short window,
        # so the exact total is split in the sampled proportion.
        total = int(_read(d / "cpuacct.usage")) / 1e9
        if (d / "cpuacct.usage_user").exists():
            user, system = int(_read(d / "cpuacct.usage_user")), int(_read(d / "cpuacct.usage_sys"))
        else:
            ticks = _keyed(d / "cpuacct.stat")
            user, system = int(ticks["user"]), int(ticks["system"])
        return split_cpu(total, user, system)

    def memory_peak(self) -> int | None:
        d = self.dirs.get("memory")
        return int(_read(d / "memory.max_usage_in_bytes")) if d else None

    def _set_frozen(self, state: str) -> bool:
        d = self.dirs.get("freezer")
        if d is None:
            return False
        _write(d / "freezer.state", state)
        for _ in range(500):
            if _read(d / "freezer.state").strip() == state:
                break
            time.sleep(0.002)
        return True

    def freeze(self) -> None:
        if not self._set_frozen("FROZEN"):
            self.signal_all(signal.SIGSTOP)

    def thaw(self) -> None:
        if not self._set_frozen("THAWED"):
            self.signal_all(signal.SIGCONT)

    def _kill_round(self, pids: list[int]) -> None:
        frozen = self._set_frozen("FROZEN")
        super()._kill_round(self.pids() if frozen else pids)
        if frozen:
            self._set_frozen("THAWED")

    def remove(self) -> None:
        for d in self.made:
            _rmdir(d)


# ---------------------------------------------------------------------- cgroup v2


class CgroupV2(ProcessSet):
    backend = "cgroup-v2"

    def __init__(self, name: str, cpus: list[int] | None, root: Path):
        super().__init__(name, cpus)
        available = set(_read(root / "cgroup.controllers").split())
        for c in ("cpuset", "cpu", "memory", "pids") if root == v2_root() else ():
            if c in available:
                try:
                    _write(root / "cgroup.subtree_control", f"+{c}")
                except OSError:
                    pass  # a controller that cannot be delegated: that accounting is simply absent
        self.dir = root / name
        self.dir.mkdir()
        try:
            if cpus and (self.dir / "cpuset.cpus").exists():
                _write(self.dir / "cpuset.cpus", format_cpu_list(cpus))
        except BaseException:
            self.remove()
            raise

    def _join(self, pid: int) -> None:
        _write(self.dir / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        return _procs(self.dir)

    def cpu_times(self) -> tuple[float, float] | None:
        stat = _keyed(self.dir / "cpu.stat")
        return int(stat["user_usec"]) / 1e6, int(stat["system_usec"]) / 1e6

    def memory_peak(self) -> int | None:
        p = self.dir / "memory.peak"
        return int(_read(p)) if p.exists() else None

    def _set_limits(self, limits: Limits) -> tuple[tuple[int, int] | None, int | None]:
        missing = [c for c in _wanted(limits) if not (self.dir / f"{c}.max").exists()]
        if missing:
            raise ArenaError(f"{limits.keys}: {_v2_missing(missing[0])}")
        if limits.cpu is not None:
            _write(self.dir / "cpu.max", f"{limits.quota_us} {limits.period_us}")
        if limits.memory_mib is not None:  # and no swap beyond it, as on a Kubernetes node
            _write(self.dir / "memory.max", str(limits.memory_bytes))
            if (self.dir / "memory.swap.max").exists():
                _write(self.dir / "memory.swap.max", "0")
        cpu = memory = None
        if limits.cpu is not None:
            quota, period = _read(self.dir / "cpu.max").split()
            cpu = None if quota == "max" else (int(quota), int(period))
        if limits.memory_mib is not None:
            held = _read(self.dir / "memory.max").strip()
            memory = None if held == "max" else int(held)
        return cpu, memory

    def cpu_stat(self) -> Path | None:
        return self.dir / "cpu.stat"

    def throttling(self) -> Throttling | None:
        stat = _keyed(self.dir / "cpu.stat")
        if "nr_periods" not in stat:  # the cpu controller is not enabled: usage only
            return None
        return Throttling(int(stat["nr_periods"]), int(stat["nr_throttled"]), int(stat["throttled_usec"]) / 1e6)

    def memory_events(self) -> MemoryEvents | None:
        p = self.dir / "memory.events"
        if not p.exists():  # the memory controller is not enabled
            return None
        events = _keyed(p)
        return MemoryEvents(int(events["max"]), int(events["oom_kill"]))

    def _set_frozen(self, frozen: bool) -> None:
        _write(self.dir / "cgroup.freeze", "1" if frozen else "0")
        want = f"frozen {int(frozen)}"
        for _ in range(500):
            if want in _read(self.dir / "cgroup.events"):
                return
            time.sleep(0.002)

    def freeze(self) -> None:
        self._set_frozen(True)

    def thaw(self) -> None:
        self._set_frozen(False)

    def _kill_round(self, pids: list[int]) -> None:
        if (self.dir / "cgroup.kill").exists():  # Linux >= 5.14: the kernel kills the whole group
            _write(self.dir / "cgroup.kill", "1")
        else:
            self._set_frozen(True)
            super()._kill_round(self.pids())
            self._set_frozen(False)

    def remove(self) -> None:
        _rmdir(self.dir)


# ---------------------------------------------------------------------- fallback


class ProcessTree(ProcessSet):
    """No cgroups: track every process that inherited our environment tag.

    CPU time is summed over live processes (plus the children they reaped), so time of processes
    that exited unreaped is missing; there is no memory peak; freezing is SIGSTOP.
    """

    backend = "process-tree"
    TAG = "ARENA_PROCSET"

    def __init__(self, name: str, cpus: list[int] | None):
        super().__init__(name, cpus)
        self._marker = f"{self.TAG}={name}".encode() + b"\0"

    def env(self) -> dict[str, str]:
        return {self.TAG: self.name}

    def _join(self, pid: int) -> None:
        pass  # the tag travels in the environment

    def pids(self) -> list[int]:
        return tagged_pids(self._marker)

    def cpu_times(self) -> tuple[float, float] | None:
        import psutil

        user = system = 0.0
        for pid in self.pids():
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            user += t.user + t.children_user
            system += t.system + t.children_system
        return user, system

    def freeze(self) -> None:
        self.signal_all(signal.SIGSTOP)

    def thaw(self) -> None:
        self.signal_all(signal.SIGCONT)

    def remove(self) -> None:
        pass


def tagged_pids(marker: bytes) -> list[int]:
    """Pids with an environment entry that starts with ``marker`` (``NAME=value\\0`` for an exact one)."""
    out = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = b"\0" + f.read()
        except OSError:
            continue
        if b"\0" + marker in env:
            out.append(int(entry.name))
    return out


def _members(name: str) -> set[int]:
    """Every process, zombies too, that belongs to the set ``name`` by any backend's mark (/proc)."""
    found = set(tagged_pids(f"{ProcessTree.TAG}={name}".encode() + b"\0"))
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cgroup") as f:
                    if any(line.rstrip().endswith("/" + name) for line in f):
                        found.add(int(entry.name))
            except OSError:
                continue
    return found


def survivors(name: str) -> list[int]:
    """Every live process that belongs to the set ``name`` by any backend's mark, found by scanning
    /proc (its cgroup paths and its environment): an independent check that a stop left nothing,
    also after the group itself was removed."""
    return sorted(pid for pid in _members(name) if not _zombie(pid))


def zombie_children(name: str) -> list[int]:
    """This process's own exited, unreaped children in the set ``name``: what keeps a group busy
    after a start was interrupted before its Popen existed (no one else will reap them)."""
    def parent(pid: int) -> int | None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            return None

    return sorted(pid for pid in _members(name) if _zombie(pid) and parent(pid) == os.getpid())


def _zombie(pid: int) -> bool:
    """A zombie has exited (nothing runs); v2 still names its group until the parent reaps it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


# ---------------------------------------------------------------------- choosing, creating, reaping


def choose_backend(requested: str | None = None) -> str:
    backend = requested or os.environ.get("ARENA_CGROUP", "auto")
    if backend not in BACKENDS:
        raise ArenaError(f"ARENA_CGROUP: must be one of {', '.join(BACKENDS)}, got '{backend}'")
    if backend != "auto":
        return backend
    roots = v1_roots()
    if {"cpuset", "cpuacct", "freezer"} <= roots.keys() and all(os.access(p, os.W_OK) for p in roots.values()):
        return "v1"
    root = v2_root()
    if root is not None and os.access(root, os.W_OK):
        return "v2"
    return "none"


def create(server: str, cpus: list[int] | None, backend: str | None = None) -> ProcessSet:
    """A new, empty process set for one start of ``server``."""
    name = owned_name(server)
    chosen = choose_backend(backend)
    try:
        if chosen == "v1":
            return CgroupV1(name, cpus, v1_roots())
        if chosen == "v2":
            root = v2_root()
            if root is None:
                raise ArenaError("ARENA_CGROUP: v2 asked for, but no cgroup2 hierarchy is mounted")
            return CgroupV2(name, cpus, root)
    except PermissionError as e:
        raise ArenaError(f"cgroup: cannot create {name} ({e}); run as root or set ARENA_CGROUP=none") from None
    return ProcessTree(name, cpus)


_issued: list[str] = []  # every name owned_name gave out, in order


def owned_name(kind: str) -> str:
    """A fresh name for something this process owns (a group, a work dir, a driver's temp dir):
    ``arena-<owner pid>-<seq>-<kind>``, so a later Arena can tell it is stale once the owner died."""
    name = f"{PREFIX}{os.getpid()}-{next(_seq)}-{kind}"
    _issued.append(name)
    return name


def issued_since(mark: int) -> list[str]:
    """The names given out since ``len(issued_since(0))`` was ``mark``."""
    return _issued[mark:]


def die_with_parent() -> None:
    """In a child between fork and exec: get SIGTERM when Arena dies (PR_SET_PDEATHSIG), so a load
    generator does not outlive a killed Arena. Linux only; elsewhere a no-op."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


OWNED = re.compile(rf"{PREFIX}(\d+)-\d+-")


def stale(name: str) -> bool:
    """Whether ``name`` is one of Arena's (``arena-<owner pid>-<seq>-...``) and its owner is gone.
    Names of any other form are not Arena's to touch."""
    m = OWNED.match(name)
    return bool(m) and not Path(f"/proc/{m.group(1)}").exists()


def reap_groups(doomed: Callable[[str], bool]) -> list[str]:
    """Kill every process of Arena's groups (and tagged process trees) whose name ``doomed``
    accepts, and remove the groups. Returns what was reaped."""
    reaped = []
    for root in set(v1_roots().values()) | ({v2_root()} - {None}):
        for d in root.glob(f"{PREFIX}*"):
            if not d.is_dir() or not doomed(d.name):
                continue
            for knob, thawed in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
                if (d / knob).exists():  # a frozen task takes no SIGKILL until thawed
                    _write(d / knob, thawed)
            for pid in _procs(d):
                _signal(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while _procs(d) and time.monotonic() < deadline:
                time.sleep(0.02)
            try:
                _rmdir(d)
                reaped.append(str(d))
            except OSError:
                pass
    for pid in tagged_pids(f"{ProcessTree.TAG}={PREFIX}".encode()):
        try:
            tag = Path(f"/proc/{pid}/environ").read_bytes().split(f"{ProcessTree.TAG}=".encode())[1].split(b"\0")[0]
        except (OSError, IndexError):
            continue
        if doomed(tag.decode()):
            _signal(pid, signal.SIGKILL)
            reaped.append(f"pid {pid} ({tag.decode()})")
    return reaped


def reap_stale() -> list[str]:
    """Kill and remove the groups of Arena processes that died without cleaning up (e.g. SIGKILL)."""
    return reap_groups(stale)
