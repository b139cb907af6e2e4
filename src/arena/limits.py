"""A container's limits on a server's process set, as a Kubernetes pod's ``resources.limits`` or
``docker run --cpus --memory`` set them: CPU time per CFS period, in cores (0.5: 50 ms of every
100 ms period, over however many CPUs the set may run on), and a memory limit. Where the set may
run (its cpuset) is another matter, as on a node: a 0.5-core quota over two CPUs is a real case.

A value type: the plan reads it from an experiment, the cgroup applies it (servers/cgroup.py), a
run stores it, and the configuration's name shows it."""

from __future__ import annotations

from dataclasses import dataclass, fields

MiB = 1024 * 1024
PERIOD_S = 0.1  # the CFS period Linux, Docker and Kubernetes use by default
PERIOD_RANGE_S = (0.001, 1.0)  # what the kernel accepts for cfs_period_us
# The kernel's smallest quota a period: 1 ms (kernel/sched/core.c, min_cfs_quota_period; a smaller
# cfs_quota_us or cpu.max is EINVAL). So a period of P ms takes at least 1/P cores.
LEAST_QUOTA_US = 1000
# The smallest memory limit a container runtime sets: Docker refuses less ("Minimum memory limit
# allowed is 6MB"); no interpreter of a server here starts in less (Python 3.11 takes 9 MiB RSS idle).
LEAST_MEMORY_MIB = 6.0


@dataclass(frozen=True)
class Limits:
    cpu: float | None = None  # cores of CPU time per period; None: no quota
    cpu_period_s: float = PERIOD_S
    memory_mib: float | None = None  # None: no limit

    @property
    def any(self) -> bool:
        return self.cpu is not None or self.memory_mib is not None

    @property
    def quota_us(self) -> int | None:
        """The CFS quota of each period, in microseconds (cpu.cfs_quota_us, cpu.max's first field)."""
        return None if self.cpu is None else round(self.cpu * self.cpu_period_s * 1e6)

    @property
    def period_us(self) -> int:
        return round(self.cpu_period_s * 1e6)

    @property
    def problem(self) -> str | None:
        """Why the kernel cannot apply these limits as they are (cpu_problem, memory_problem), with
        the key each concerns; None: it can."""
        for key, problem in (("cpu_limit", self.cpu is not None and cpu_problem(self.cpu, self.cpu_period_s)),
                             ("memory_limit", self.memory_mib is not None and memory_problem(self.memory_mib))):
            if problem:
                return f"{key} {problem}"
        return None

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory_mib is None else int(self.memory_mib * MiB)

    @property
    def text(self) -> str:
        """As a configuration's name shows them: "cpu=0.5 mem=256MiB" ("cpu=0.5/50ms" for a period
        other than 100 ms); "" for none."""
        parts = []
        if self.cpu is not None:
            period = "" if self.cpu_period_s == PERIOD_S else f"/{self.cpu_period_s * 1000:g}ms"
            parts.append(f"cpu={self.cpu:g}{period}")
        if self.memory_mib is not None:
            parts.append(f"mem={memory_text(self.memory_mib)}")
        return " ".join(parts)

    @property
    def entry(self) -> dict[str, float]:
        """As a [[servers]] entry's keys, typed: {"cpu_limit": 0.5, "cpu_period": 0.1, "memory_limit": 256.0}
        (the file's reader takes a period as a number of seconds and a size as a number of MiB)."""
        out: dict[str, float] = {}
        if self.cpu is not None:
            out.update(cpu_limit=self.cpu, cpu_period=self.cpu_period_s)
        if self.memory_mib is not None:
            out["memory_limit"] = self.memory_mib
        return out

    @property
    def keys(self) -> str:
        """As an experiment's keys set them: "cpu_limit = 0.5, memory_limit = 256MiB" (what an error names)."""
        return ", ".join(([f"cpu_limit = {self.cpu:g}"] if self.cpu is not None else [])
                         + ([f"memory_limit = {memory_text(self.memory_mib)}"] if self.memory_mib is not None else []))


def period_problem(period_given: bool, quota_given: bool, quota: str) -> str | None:
    """The limits' one rule across keys: a CFS period is its quota's, refused without one (``quota``:
    how the caller names the quota, a key or a flag)."""
    return f"is the period of {quota}: give {quota} too" if period_given and not quota_given else None


def cpu_problem(cpu: float, period_s: float = PERIOD_S) -> str | None:
    """Why the kernel cannot apply a quota of ``cpu`` cores a ``period_s`` period (None: it can, as
    asked): below its smallest quota, which it would refuse (Arena never raises one silently)."""
    if cpu * period_s * 1e6 >= LEAST_QUOTA_US - 0.5:  # what quota_us rounds to 1000 is 1 ms
        return None
    return (f"is {cpu * period_s * 1e3:g} ms of CPU time a {period_s * 1e3:g} ms period, below the kernel's smallest "
            f"quota of 1 ms a period: at least {LEAST_QUOTA_US / (period_s * 1e6):g} cores with this period")


def memory_problem(mib: float) -> str | None:
    """Why no server can be started under a memory limit of ``mib`` (None: one can)."""
    if mib >= LEAST_MEMORY_MIB:
        return None
    return (f"is below {LEAST_MEMORY_MIB:g}MiB, the smallest memory limit a container runtime sets (Docker's): "
            "no server here starts in less")


def memory_text(mib: float) -> str:
    """512 -> "512MiB", 1536 -> "1.5GiB"."""
    return f"{mib / 1024:g}GiB" if mib >= 1024 and (mib / 1024 * 10).is_integer() else f"{mib:g}MiB"


class Counters:
    """Cumulative counters of a cgroup read at a window's two ends: the window's are end less start,
    and several groups' (a fleet's instances, each with its own limits) are their sum, field by field."""

    def __add__(self, other):
        return type(self)(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __sub__(self, start):
        return type(self)(*(getattr(self, f.name) - getattr(start, f.name) for f in fields(self)))


@dataclass(frozen=True)
class Throttling(Counters):
    """What a CPU quota did over a window (the cgroup's cpu.stat, end less start): CFS periods in
    which the set ran, those of them in which it used up its quota and waited, and the time it
    waited (summed over its CPUs, as the kernel counts it)."""

    periods: int
    throttled_periods: int
    throttled_s: float


@dataclass(frozen=True)
class MemoryEvents(Counters):
    """What a memory limit did over a window (end less start): the times the set's usage reached its
    limit and the kernel had to reclaim first (v1 memory.failcnt, v2 memory.events ``max``), and the
    processes the kernel's OOM killer ended (``oom_kill`` of v1 memory.oom_control, v2 memory.events)."""

    limit_hits: int
    oom_kills: int
