"""A whole deployment: the server's instances and the front before them, started in that order
and stopped in the reverse one. To the runner it is one server: its URL is the front's, its
process set all the instances' (the front is measured on its own, like a service), alive while
every part is."""

from __future__ import annotations

import contextlib
import functools
import operator
from dataclasses import dataclass, field, replace
from typing import Callable

from arena.cpus import format_cpu_list
from arena.limits import Counters, MemoryEvents, Throttling
from arena.servers.launch import RunningServer, ServerSpec, check_port, start
from arena.topology import Topology
from arena.topology.front import RunningFront, start_front


class Fleet:
    """The instances' process sets as one (probe.Source): pids and CPU summed, memory peaks summed
    (each set's own high-water mark: an upper bound of the fleet's)."""

    def __init__(self, sets: list) -> None:
        self.sets = sets
        self.backend = sets[0].backend

    def pids(self) -> list[int]:
        return [p for s in self.sets for p in s.pids()]

    def cpu_times(self) -> tuple[float, float] | None:
        times = [s.cpu_times() for s in self.sets]
        if any(t is None for t in times):
            return None
        return sum(t[0] for t in times), sum(t[1] for t in times)

    def memory_peak(self) -> int | None:
        peaks = [s.memory_peak() for s in self.sets]
        return None if any(p is None for p in peaks) else sum(peaks)

    def throttling(self) -> Throttling | None:
        """Each instance's quota is its own: their periods and throttled time summed."""
        return _summed([s.throttling() for s in self.sets])

    def memory_events(self) -> MemoryEvents | None:
        """Each instance's memory limit is its own: their events summed."""
        return _summed([s.memory_events() for s in self.sets])


def _summed(got: list[Counters | None]) -> Counters | None:
    return None if any(c is None for c in got) else functools.reduce(operator.add, got)


@dataclass(eq=False)
class Deployment:
    topology: Topology
    instances: list[RunningServer]
    front: RunningFront
    procset: Fleet = field(init=False)

    def __post_init__(self) -> None:
        self.procset = Fleet([i.procset for i in self.instances])

    @property
    def url(self) -> str:
        return self.front.url

    @property
    def host(self) -> str:
        return self.front.host

    @property
    def port(self) -> int:
        return self.front.port

    @property
    def parts(self) -> list:
        """Everything it started: the instances and the front."""
        return [*self.instances, self.front]

    @property
    def knobs(self) -> dict:
        return self.instances[0].knobs

    def alive(self) -> bool:
        return all(p.alive() for p in self.parts)

    def log_tail(self) -> str:
        """The last lines of the log of a part that died (else the front's)."""
        dead = next((p for p in self.parts if not p.alive()), self.front)
        return dead.log_tail()

    def described(self) -> dict:
        """How it was started: the first instance's command (the others differ only by port or
        socket and CPUs), the topology, each instance's address and the front's command."""
        return {**self.instances[0].described(), "topology": self.topology.describe(),
                "instances": [{"address": i.socket or i.url,
                               "cpus": format_cpu_list(i.spec.cpus) if i.spec.cpus else None} for i in self.instances],
                "front": {"kind": self.front.kind, "version": self.front.version, "argv": self.front.argv}}

    def window(self, since: float, until: float) -> dict:
        """The front's figures for the requests accepted in [since, until) (unix times)."""
        return self.front.window(since, until, len(self.instances))

    def stop(self) -> None:
        """The front first (no new requests reach the instances), then the instances."""
        with contextlib.ExitStack() as stack:
            for i in self.instances:
                stack.callback(i.stop)
            stack.callback(self.front.stop)

    def __enter__(self) -> "Deployment":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_deployment(spec: ServerSpec, t: Topology, front_cpus: list[int] | None,
                     launch: Callable[[ServerSpec], RunningServer] = start) -> Deployment:
    """Start ``t``'s instances of ``spec`` (each confined on its own, its CPUs as ``t`` places them,
    on a unix socket in its temp dir where ``t`` says so, on free ports otherwise), then its front on
    ``front_cpus`` and on the spec's port (the deployment's address); on any failure stop what started
    and raise."""
    from arena.topology import instance_cpus

    check_port(spec.host, spec.port)  # the front's: refused before any instance starts
    with contextlib.ExitStack() as stack:
        instances = []
        for cpus in instance_cpus(spec.cpus, t):
            instances.append(stack.enter_context(launch(replace(spec, cpus=cpus, unix=t.upstream == "unix", port=None))))
        pids = lambda pid: any(pid in i.procset.pids() for i in instances)  # noqa: E731
        upstreams = [i.socket or f"{i.host}:{i.port}" for i in instances]
        health = instances[0].health
        front = stack.enter_context(start_front(t, upstreams, front_cpus, spec.host, pids, health, spec.port))
        stack.pop_all()
    return Deployment(t, instances, front)
