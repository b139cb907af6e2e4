"""Deployment topology: what stands between the clients and the server's instances.

- none: the load generator talks to the server (one instance), as every study so far;
- a reverse proxy (``proxy = "nginx"``): Debian's nginx, with proxy buffering on or off and
  keep-alive connections to the server on or off, over TCP or a unix socket;
- a fleet (``instances = N``) behind a balancer (``balancer = "haproxy"``): N copies of the server
  configuration, each confined on its own, behind Debian's HAProxy with one of its balance policies
  and, optionally, a limit of connections per instance (``maxconn = 1``: one request at a time per
  instance, the rest queueing in the balancer, as a platform router with single-threaded dynos).

The proxy and the balancer run with the guarantees of a server (launch.Confined): their own process
set on declared CPUs, their own temp dir (config, log, sockets), a graceful stop then a kill, nothing
left after a crash, Ctrl-C or SIGTERM. This module owns the settings and their names; nginx.py and
haproxy.py write each front's config (pure) and start it; deployment.py starts the whole chain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arena.errors import ArenaError

PROXIES = ("nginx",)
BALANCERS = ("haproxy",)
POLICIES = ("roundrobin", "leastconn", "random", "random(2)")  # HAProxy's names; random(2): power of two choices
UPSTREAMS = ("tcp", "unix")
PLACEMENTS = ("shared", "split")  # instances on every server CPU, or the server CPUs dealt out among them
MAX_INSTANCES = 64


@dataclass(frozen=True)
class Topology:
    proxy: str | None = None  # "nginx": a reverse proxy in front of one instance
    balancer: str | None = None  # "haproxy": a balancer in front of ``instances``
    instances: int = 1
    balance: str = "roundrobin"  # the balancer's policy
    maxconn: int | None = None  # connections per instance at the balancer (None: no limit)
    buffering: bool = True  # nginx: proxy_buffering and proxy_request_buffering
    upstream_keepalive: bool = True  # nginx: keep connections to the server open between requests
    upstream: str = "tcp"  # how the front reaches the server: "tcp" or "unix" (a socket in the instance's temp dir)
    placement: str = "shared"  # instance_cpus: "shared" (each on all server CPUs) or "split" (dealt out)

    @property
    def front(self) -> str | None:
        """The process the clients talk to, when it is not the server itself."""
        return self.proxy or self.balancer

    @property
    def text(self) -> str:
        """How the configuration's name shows it ("" for a bare server): the front and what differs
        from its defaults."""
        if self.front is None:
            return ""
        d = Topology()
        if self.proxy:
            parts = [f"buffering={'on' if self.buffering else 'off'}"] if self.buffering != d.buffering else []
            parts += ["upstream_keepalive=off"] if not self.upstream_keepalive else []
        else:
            parts = [self.balance] + ([f"maxconn={self.maxconn}"] if self.maxconn is not None else [])
            parts += [f"instance_cpus={self.placement}"] if self.placement != d.placement else []
        parts += [f"upstream={self.upstream}"] if self.upstream != d.upstream else []
        fleet = f"{self.instances}x " if self.balancer else ""
        return f"{fleet}via {self.front}" + (f"({', '.join(parts)})" if parts else "")

    def describe(self) -> dict[str, Any]:
        """Stored with each run."""
        return {"proxy": self.proxy, "balancer": self.balancer, "instances": self.instances,
                **({"balance": self.balance, "maxconn": self.maxconn, "placement": self.placement} if self.balancer else {}),
                **({"buffering": self.buffering, "upstream_keepalive": self.upstream_keepalive} if self.proxy else {}),
                "upstream": self.upstream}


BARE = Topology()

# key -> (allowed values or a check, what is allowed, which front it belongs to: None = any)
KEYS: dict[str, tuple[Any, str, str | None]] = {
    "proxy": (PROXIES, " or ".join(f'"{p}"' for p in PROXIES), None),
    "balancer": (BALANCERS, " or ".join(f'"{b}"' for b in BALANCERS), None),
    "instances": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_INSTANCES,
                  f"a whole number from 1 to {MAX_INSTANCES}", "balancer"),
    "balance": (POLICIES, ", ".join(f'"{p}"' for p in POLICIES), "balancer"),
    "maxconn": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100_000,
                "a whole number from 1 to 100000", "balancer"),
    "buffering": ((True, False), "true or false", "proxy"),
    "upstream_keepalive": ((True, False), "true or false", "proxy"),
    "upstream": (UPSTREAMS, " or ".join(f'"{u}"' for u in UPSTREAMS), None),
    "instance_cpus": (PLACEMENTS, " or ".join(f'"{p}"' for p in PLACEMENTS), "balancer"),
}
FIELD = {"instance_cpus": "placement"}  # a key whose field has another name


def value_problem(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be the topology's ``key`` (None: it can)."""
    if key not in KEYS:
        return f"unknown key (allowed: {', '.join(KEYS)})"
    allowed, text, _ = KEYS[key]
    ok = allowed(value) if callable(allowed) else any(value is a if isinstance(a, bool) else value == a for a in allowed)
    return None if ok else f"must be {text}"


def topology(given: dict[str, Any], server: Any = None, unix_servers: tuple[str, ...] = ()) -> Topology:
    """A topology from checked values (value_problem); its combinations checked here: one front,
    a fleet only behind a balancer, each front's own keys only with it, a unix socket only for a
    ``server`` (a catalog entry) that can bind one (``unix_servers``: those that can, named in the
    refusal). Raises ArenaError "key: why" (the caller adds where)."""
    for key, value in given.items():
        problem = value_problem(key, value)
        if problem:
            raise ArenaError(f"{key}: {problem}")
    if given.get("proxy") and given.get("balancer"):
        raise ArenaError("balancer: give a proxy or a balancer in front, not both")
    if given.get("instances", 1) > 1 and not given.get("balancer"):
        raise ArenaError("instances: more than one instance needs a balancer in front (balancer = \"haproxy\")")
    for key in given:
        needs = KEYS[key][2]
        if needs and not given.get(needs):
            raise ArenaError(f"{key}: applies to a {needs} (set {needs} = \"{KEYS[needs][0][0]}\")")
    if given.get("upstream") and not (given.get("proxy") or given.get("balancer")):
        raise ArenaError("upstream: applies to a proxy or a balancer")
    t = Topology(**{FIELD.get(k, k): v for k, v in given.items()})
    if server is not None and t.upstream == "unix" and server.unix is None:
        raise ArenaError(f"upstream: {server.name} cannot listen on a unix socket here (those that can: "
                         f"{', '.join(unix_servers)})")
    return t


def parse_value(text: str) -> bool | int | str:
    """A value given on the command line (--topology KEY=VALUE): true/false, a whole number, or text."""
    if text in ("true", "false"):
        return text == "true"
    return int(text) if text.isdigit() else text


def instance_cpus(cpus: list[int] | None, t: Topology) -> list[list[int] | None]:
    """Pure: each instance's CPUs. Shared: all of ``cpus`` each; split: ``cpus`` dealt out in turn
    (instance i gets cpus[i], cpus[i + n], ...), which needs at least one CPU per instance."""
    if t.placement == "shared" or cpus is None:
        return [cpus] * t.instances
    if len(cpus) < t.instances:
        raise ArenaError(f"instance_cpus = \"split\": {t.instances} instances need at least {t.instances} server CPUs "
                         f"(there are {len(cpus)})")
    return [cpus[i::t.instances] for i in range(t.instances)]
