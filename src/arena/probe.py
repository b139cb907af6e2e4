"""Resource sampling of a running server's whole process set over a window -> ResourceResult.

CPU comes from the group's accounting (start and end of the window). Memory is sampled every
``interval`` seconds of every process in the set (psutil, from the kernel's smaps_rollup): PSS
(shared pages divided among the processes sharing them: the honest total for forked workers), USS (private
pages: what one more worker would cost) and RSS (counts shared pages once per process, so summed
RSS overstates forked servers; kept for comparison with tools that report it).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Protocol

import psutil

from arena.limits import MemoryEvents, Throttling
from arena.results.resources import ResourceResult


class Source(Protocol):
    backend: str

    def pids(self) -> list[int]: ...

    def cpu_times(self) -> tuple[float, float] | None: ...

    def memory_peak(self) -> int | None: ...

    def throttling(self) -> Throttling | None: ...

    def memory_events(self) -> MemoryEvents | None: ...


@dataclass(frozen=True)
class ProcessMemory:
    pss: int  # bytes
    uss: int
    rss: int
    threads: int


@dataclass(frozen=True)
class Sample:
    """The whole set at one instant: sums over its processes."""

    pss: int
    uss: int
    rss: int
    processes: int
    threads: int


# ---------------------------------------------------------------------- pure parts

def combine(memories: list[ProcessMemory]) -> Sample:
    return Sample(sum(m.pss for m in memories), sum(m.uss for m in memories), sum(m.rss for m in memories),
                  len(memories), sum(m.threads for m in memories))


def summarize(samples: list[Sample], cpu_start: tuple[float, float] | None, cpu_end: tuple[float, float] | None,
              window_s: float, memory_peak: int | None, backend: str,
              throttled: Throttling | None = None, memory: MemoryEvents | None = None) -> ResourceResult:
    """Pure: the window's samples, CPU counters, and the quota's throttling and the memory limit's
    events over it (end less start) -> ResourceResult."""
    has_cpu = cpu_start is not None and cpu_end is not None
    return ResourceResult(
        window_s=window_s,
        samples=len(samples),
        cpu_user_s=cpu_end[0] - cpu_start[0] if has_cpu else None,
        cpu_system_s=cpu_end[1] - cpu_start[1] if has_cpu else None,
        pss_bytes=max((s.pss for s in samples), default=0),
        pss_mean_bytes=round(sum(s.pss for s in samples) / len(samples)) if samples else 0,
        uss_bytes=max((s.uss for s in samples), default=0),
        rss_bytes=max((s.rss for s in samples), default=0),
        memory_peak_bytes=memory_peak,
        processes=max((s.processes for s in samples), default=0),
        threads=max((s.threads for s in samples), default=0),
        backend=backend,
        cpu_periods=throttled.periods if throttled else None,
        cpu_throttled_periods=throttled.throttled_periods if throttled else None,
        cpu_throttled_s=throttled.throttled_s if throttled else None,
        memory_limit_hits=memory.limit_hits if memory else None,
        oom_kills=memory.oom_kills if memory else None,
    )


# ---------------------------------------------------------------------- reading /proc


def read_process(pid: int) -> ProcessMemory | None:
    """One process's memory and threads (psutil's memory_full_info: PSS and USS from the kernel's
    /proc/PID/smaps_rollup), or None when it exited meanwhile or cannot be read."""
    try:
        p = psutil.Process(pid)
        m = p.memory_full_info()
        return ProcessMemory(m.pss, m.uss, m.rss, p.num_threads())
    except psutil.Error:
        return None


def sample_once(source: Source, reader: Callable[[int], ProcessMemory | None] = read_process) -> Sample:
    return combine(list(read_each(source, reader).values()))


def read_each(source: Source, reader: Callable[[int], ProcessMemory | None] = read_process) -> dict[int, ProcessMemory]:
    """Each process of the set read once, by pid (those that exited meanwhile left out)."""
    return {pid: m for pid, m in ((pid, reader(pid)) for pid in source.pids()) if m is not None}


# ---------------------------------------------------------------------- the probe


class Probe:
    """Samples ``source`` every ``interval`` seconds on a background thread from start() to stop().

    Always takes a sample at start and at stop, so even a short window has two. With
    ``per_process``, each sample's PSS of every process is kept too, by pid, with its time since
    the start (a soak's memory over time).
    """

    def __init__(self, source: Source, interval: float = 0.5,
                 reader: Callable[[int], ProcessMemory | None] = read_process,
                 clock: Callable[[], float] = time.monotonic, per_process: bool = False):
        self.source, self.interval, self.reader, self.clock = source, interval, reader, clock
        self.per_process = per_process
        self._series: list[tuple[float, dict[str, int]]] = []
        self._samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._cpu0: tuple[float, float] | None = None
        self._throttled0: Throttling | None = None
        self._memory0: MemoryEvents | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> "Probe":
        self._t0 = self.clock()
        self._cpu0 = self.source.cpu_times()
        self._throttled0 = self.source.throttling()
        self._memory0 = self.source.memory_events()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="arena-probe", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        each = read_each(self.source, self.reader)
        self._samples.append(combine(list(each.values())))
        if self.per_process:
            self._series.append((round(self.clock() - self._t0, 3), {str(pid): m.pss for pid, m in each.items()}))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def stop(self) -> ResourceResult:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        window = self.clock() - self._t0
        result = summarize(self._samples, self._cpu0, self.source.cpu_times(), window,
                           self.source.memory_peak(), self.source.backend,
                           _since(self._throttled0, self.source.throttling()),
                           _since(self._memory0, self.source.memory_events()))
        return replace(result, pss_series=self._series) if self.per_process else result

    def __enter__(self) -> "Probe":
        return self.start()

    def __exit__(self, *exc) -> None:
        if not self._stop.is_set():
            self.stop()



def _since(start, end):
    """A window's counters: end less start, where both were read."""
    return None if start is None or end is None else end - start
