"""What the probe measured of a confined process set over a run's window (probe.py measures it):
a value type, stored with each run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceResult:
    window_s: float
    samples: int
    cpu_user_s: float | None  # None where the backend cannot account CPU
    cpu_system_s: float | None
    pss_bytes: int  # max over the window's samples
    pss_mean_bytes: int
    uss_bytes: int  # max
    rss_bytes: int  # max
    memory_peak_bytes: int | None  # the group's high-water mark since it was created
    processes: int  # max
    threads: int  # max
    backend: str
    # the server's CPU use with no load, in cores, probed at the configuration's first start in the
    # experiment (runner.idle_cpu_cores)
    idle_cpu_cores: float | None = None
    # under a CPU quota (the cgroup's cpu.stat over the window): CFS periods, those throttled, time throttled
    cpu_periods: int | None = None
    cpu_throttled_periods: int | None = None
    cpu_throttled_s: float | None = None
    # under a memory limit (the cgroup's events over the window): times the limit was reached, OOM kills
    memory_limit_hits: int | None = None
    oom_kills: int | None = None
    # a soak's memory over time: at each sample, seconds since the window's start and each process's
    # PSS in bytes, by pid (a JSON object's keys: strings); None where not kept
    pss_series: list[tuple[float, dict[str, int]]] | None = None
    # TCP_NODELAY on the server's accepted connections, read once at the window's start (sockets.py):
    # how many were read, how many had it off (Nagle on); or why none could be (None: not asked)
    nodelay_checked: int | None = None
    nodelay_off: int | None = None
    nodelay_unchecked: str | None = None
    # processes of the server gone over the run and as many started in their place (a worker killed and
    # restarted: a timeout, max_requests, an OOM kill), and the server's log's last lines where any was
    replaced: int | None = None
    replaced_log: str | None = None
    # connections the kernel turned away at a full accept queue while the load ran (TcpExt ListenOverflows
    # and ListenDrops: the namespace's, whoever listened; None: not read)
    listen_overflows: int | None = None
    listen_drops: int | None = None

    @property
    def cpu_s(self) -> float | None:
        return None if self.cpu_user_s is None else self.cpu_user_s + self.cpu_system_s

    @property
    def cpu_cores(self) -> float | None:
        """Mean number of cores busy over the window."""
        return None if self.cpu_s is None or self.window_s <= 0 else self.cpu_s / self.window_s
