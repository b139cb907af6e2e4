"""``arena simulate``: one server (processes x threads on cores, with a GIL) or a fleet of instances
behind a balancer, simulated (arena.model.sim); the rules of what a simulation needs, and how many
requests each replication takes."""

from __future__ import annotations

from dataclasses import dataclass

from arena.errors import ArenaError
from arena.model.sim import Dist, Summary, fleet, instances_for
from arena.model.instance_sim import Instance, Work, instance
from arena.model.simulated import discipline

MOST_REQUESTS = 20_000_000
CLOSED_REQUESTS = 20_000  # per replication of a closed load (it has no rate to scale with the duration)


def requests_per_replication(rate: float | None, duration_s: float) -> int:
    """The rate over the duration (at least 1,000), or CLOSED_REQUESTS for closed clients."""
    if rate is None:
        return CLOSED_REQUESTS
    requests = max(1000, round(rate * duration_s))
    if requests > MOST_REQUESTS:
        raise ArenaError(f"--rate x --duration: {requests} requests per replication; at most {MOST_REQUESTS}")
    return requests


@dataclass(frozen=True)
class Matched:
    """How many instances each policy needs to come within ``within_s`` of the mean queue time
    ``policy`` reaches with ``instances`` (None: more than the search's bound)."""

    policy: str
    instances: int
    reached_s: float
    within_s: float
    needs: dict[str, int | None]


@dataclass(frozen=True)
class Fleet:
    requests: int
    replications: int
    by_policy: dict[str, Summary]
    matched: Matched | None = None


def simulate_fleet(instances: int, policies: list[str], rate: float | None, service: Dist | None, *, slots: int,
                   duration_s: float, replications: int, seed: int, arrival: str,
                   match: tuple[str, int] | None = None, within_s: float = 0.001) -> Fleet:
    """Each policy's fleet at ``rate``; with ``match``, the instances each needs for the queue time
    ``match``'s policy reaches with its count."""
    if rate is None or service is None:
        raise ArenaError("--instances: a fleet needs --rate and --service")
    requests = requests_per_replication(rate, duration_s)
    common = dict(slots=slots, replications=replications, seed=seed, arrival=arrival)
    by_policy = {p: fleet(instances, p, rate, service, requests, **common) for p in policies}
    matched = None
    if match:
        policy, n = match
        reached = fleet(n, policy, rate, service, requests, **common).wait_mean.mean
        needs = {p: instances_for(reached + within_s, p, rate, service, requests, **common, lo=1, hi=max(100_000, n))
                 for p in policies}
        matched = Matched(policy, n, reached, within_s, needs)
    return Fleet(requests, replications, by_policy, matched)


@dataclass(frozen=True)
class OneServer:
    instance: Instance
    work: Work
    discipline: str  # how connections find their processes (model.simulated.discipline)
    requests: int
    replications: int
    summary: Summary


def simulate_server(processes: int, threads: int, cores: float, *, gil: bool, accept: str, least_busy: bool,
                    inline: int, blocking_io: bool, cpu: Dist | None, io: Dist | None, outside_s: float,
                    clients: int | None, rate: float | None, arrival: str, duration_s: float, replications: int,
                    seed: int) -> OneServer:
    """One server under ``clients`` closed-loop clients or arrivals at ``rate``."""
    if cpu is None or (clients is None) == (rate is None):
        raise ArenaError("--processes: one server needs --cpu and one of --concurrency or --rate")
    if (inline or least_busy) and accept != "per-process":
        raise ArenaError("--inline/--least-busy: they need --accept per-process (connections that stay with a process)")
    inst = Instance(processes, threads, cores, gil=gil, accept=accept, blocking_io=blocking_io, inline=inline,
                    least_busy=least_busy)
    work = Work(cpu, io or Dist("fixed", 0.0), outside_s)
    requests = requests_per_replication(rate, duration_s)
    summary = instance(inst, work, clients=clients, rate=rate, arrival=arrival, requests=requests,
                       replications=replications, seed=seed)
    return OneServer(inst, work, discipline(inst), requests, replications, summary)
