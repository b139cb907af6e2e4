"""Network namespaces for several hosts on one machine: a bridge with this machine's end at .1,
two load namespaces at .11 and .12 and a server host's at .20 of a private /24 named after the
creating process, a Dask scheduler on the bridge, a load worker in each load namespace and a
server worker in its own (tests/test_cluster.py, benches/cluster_scale.py). Everything started is
ended by its pid; close() removes it all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from arena.http_client import free_port

VENV = Path(sys.executable).parent


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


def end(p: subprocess.Popen) -> None:
    try:
        tree = [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]
    except psutil.Error:
        tree = []
    for q in tree:
        try:
            q.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(tree, timeout=5)
    for q in alive:
        q.kill()
    p.wait(timeout=5)


class Namespaces:
    """The bridge and the namespaces; ``cluster()`` starts the scheduler and the workers."""

    def __init__(self) -> None:
        tag = os.getpid() % 100000
        self.net = f"10.{200 + tag % 50}.{tag % 250}"
        self.bridge = f"arbr{tag}"
        self.names = [f"arena-load{i}-{tag}" for i in (1, 2)]  # the load hosts'
        self.ips = [f"{self.net}.{10 + i}" for i in (1, 2)]
        self.server_ns, self.server_ip = f"arena-server-{tag}", f"{self.net}.20"  # the server host's
        self.host_ip = f"{self.net}.1"
        self.procs: list[subprocess.Popen] = []
        self.server_worker: subprocess.Popen | None = None
        # each process's log, a file: a pipe nobody reads fills (64 KiB of Dask's log lines) and then
        # blocks the scheduler mid-write, and every client of it with it
        self.logs = Path(tempfile.mkdtemp(prefix="arena-netns-"))
        self.tmp = self.logs / "tmp"
        self.tmp.mkdir()

    def create(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, (ns, ip) in enumerate(zip([*self.names, self.server_ns], [*self.ips, self.server_ip]), 1):
            outside, inside = f"{self.bridge}v{i}", f"{self.bridge}n{i}"
            _ip("netns", "add", ns)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", ns)
            _ip("link", "set", outside, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", inside)
            _ip("-n", ns, "link", "set", inside, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def start(self, argv: list[str], ns: str | None = None, cpus: str | None = "0") -> subprocess.Popen:
        """``argv`` in namespace ``ns``, on ``cpus`` (CPU 0: the load's CPU here, away from the server's,
        CPU 1, as on hosts of their own; None: every CPU, as the server host's worker, which pins its
        servers itself). Its temporary files go under this test's directory (TMPDIR), which
        ``close`` removes: what a process killed mid-way leaves (as a server host taken down) goes too."""
        prefix = (["ip", "netns", "exec", ns] if ns else []) + (["taskset", "-c", cpus] if cpus else [])
        with open(self.logs / f"{len(self.procs)}-{Path(argv[0]).name}.log", "wb") as log:
            p = subprocess.Popen(prefix + argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                 start_new_session=True, env={**os.environ, "TMPDIR": str(self.tmp)})
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:  # the processes this test started, by their pids (and their own children)
            end(p)
        for ns in [*self.names, self.server_ns]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=10)
        shutil.rmtree(self.logs, ignore_errors=True)


    def cluster(self) -> tuple[str, list[subprocess.Popen]]:
        """A Dask scheduler on the bridge, a load worker in each load namespace and the server host's
        worker in its own (``server_worker``; the load's on CPU 0, the server host's on all: a
        server it starts is pinned to its own);
        the scheduler's address and the load workers, once all have joined."""
        from distributed import Client

        port = free_port(self.host_ip)
        address = f"tcp://{self.host_ip}:{port}"
        self.start([str(VENV / "dask"), "scheduler", "--host", self.host_ip, "--port", str(port), "--no-dashboard"])
        workers = [self.start([str(VENV / "dask"), "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                               "--resources", "arena-load=1", "--name", f"load{i}", "--host", ip], ns)
                   for i, (ns, ip) in enumerate(zip(self.names, self.ips), 1)]
        self.start_server_worker(address)
        with Client(address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(len(workers) + 1, timeout=60)
        return address, workers

    def start_server_worker(self, address: str) -> None:
        """The server host's worker (``server_worker``), in its namespace, on every CPU."""
        self.server_worker = self.start([str(VENV / "dask"), "worker", address, "--nthreads", "1", "--no-nanny",
                                         "--no-dashboard", "--resources", "arena-server=1", "--name", "server",
                                         "--host", self.server_ip], self.server_ns, cpus=None)
