"""How many processes each server's documentation or conventions give it, and what that becomes in a
container with a CPU quota: data, one entry per server.

A quota is not a core count. In a container limited to one CPU on a 64-core node, the usual ways of
counting cores all see the node: ``os.cpu_count()`` and ``multiprocessing.cpu_count()`` count its
CPUs, Python 3.13's ``os.process_cpu_count()`` counts those the process may run on (its cpuset: every
CPU of the node, where a pod has no cpuset of its own), ``nproc`` the same, and Ruby's ``Etc.nprocessors``
too. None of them reads the quota (cpu.max, cpu.cfs_quota_us). So gunicorn's suggested
``2 x cores + 1`` starts 129 workers on that node under a quota of one CPU (gunicorn issues #2028,
#2877), where the rule applied to the quota would start 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NOT_CORES = ("A quota is not a core count: os.cpu_count() (and Python 3.13's os.process_cpu_count(), nproc: the cpuset) "
             "in a container: the node's.")


@dataclass(frozen=True)
class Sizing:
    """A server's documented process count: ``per_core`` processes a core and ``plus`` more (a fixed
    count where ``per_core`` is 0), as ``rule`` says it, from ``reference``."""

    rule: str
    per_core: float
    plus: int
    reference: str

    @property
    def counts_cores(self) -> bool:
        return self.per_core > 0

    def processes(self, cores: float) -> int:
        """The count the rule gives for ``cores`` (a quota's are rounded up: 0.5 of a CPU is one)."""
        return max(1, int(self.per_core * math.ceil(cores)) + self.plus)

    def inside(self, node_cores: int, quota: float | None) -> str:
        """What it comes to in a container on a node of ``node_cores`` under ``quota`` cores, in words."""
        if not self.counts_cores:
            return f"{self.processes(node_cores)}, whatever the node or the quota"
        on_node = f"{self.processes(node_cores)} on a node of {node_cores} cores (it counts the node's)"
        if quota is None:
            return on_node
        return f"{on_node}; {self.processes(quota)} if it counted the quota of {quota:g}"

    def figures(self, node_cores: int, quota: float | None) -> dict:
        """As ``arena servers --json`` gives it (schemas/servers.schema.json's ``sizing``)."""
        return {"rule": self.rule, "per_core": self.per_core, "plus": self.plus, "reference": self.reference,
                "on_node": self.processes(node_cores), "for_quota": None if quota is None else self.processes(quota)}


GUNICORN = Sizing("2 x cores + 1 workers, its docs' suggestion (--workers, $WEB_CONCURRENCY; default 1)", 2, 1,
                  "https://docs.gunicorn.org/en/stable/design.html#how-many-workers")
ONE_PROCESS = "1 process"
SIZINGS: dict[str, Sizing] = {
    "gunicorn-sync": GUNICORN,
    "gunicorn-gthread": GUNICORN,
    "gunicorn-gevent": GUNICORN,
    "gunicorn-uvicorn": GUNICORN,
    "uvicorn": Sizing("1 worker (--workers, $WEB_CONCURRENCY)", 0, 1,
                      "https://www.uvicorn.org/settings/#production"),
    "hypercorn": Sizing("1 worker (--workers)", 0, 1, "https://hypercorn.readthedocs.io/en/latest/how_to_guides/configuring.html"),
    "granian": Sizing("1 worker (--workers)", 0, 1, "https://github.com/emmett-framework/granian#options"),
    "uwsgi": Sizing("1 process (--processes)", 0, 1, "https://uwsgi-docs.readthedocs.io/en/latest/Options.html#processes"),
    "waitress": Sizing("1 process of 4 threads", 0, 1, "https://docs.pylonsproject.org/projects/waitress/en/stable/arguments.html"),
    "daphne": Sizing(ONE_PROCESS, 0, 1, "https://github.com/django/daphne#readme"),
    "bjoern": Sizing(ONE_PROCESS, 0, 1, "https://github.com/jonashaag/bjoern#readme"),
    "wsgiref": Sizing(ONE_PROCESS, 0, 1, "https://docs.python.org/3/library/wsgiref.html"),
    "puma": Sizing("$WEB_CONCURRENCY workers, else single mode: 1 process of $RAILS_MAX_THREADS threads", 0, 1,
                   "https://github.com/puma/puma/blob/master/docs/deployment.md"),
    "unicorn": Sizing("at least one worker per core, its example config (worker_processes)", 1, 0,
                      "https://yhbt.net/unicorn/examples/unicorn.conf.rb"),
    "passenger": Sizing("passenger_max_pool_size 6 processes", 0, 6,
                        "https://www.phusionpassenger.com/docs/references/config_reference/nginx/#passenger_max_pool_size"),
    "thin": Sizing(ONE_PROCESS, 0, 1, "https://github.com/macournoyer/thin#readme"),
    "thin-threaded": Sizing(ONE_PROCESS, 0, 1, "https://github.com/macournoyer/thin#readme"),
    "webrick": Sizing(ONE_PROCESS, 0, 1, "https://github.com/ruby/webrick#readme"),
}
