"""Several load hosts (drivers/cluster.py, results/combine.py): the shares, the target rule, the
exact merge; then for real, across network namespaces this test creates: a Dask scheduler on a
bridge, two load workers in their own namespaces, a real server, real arena-load processes; a
worker lost mid-run; a coordinator killed mid-run."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from arena.drivers.cluster import LATE_MS, check_target, shares, stagger_s
from arena.drivers.external import histogram
from arena.drivers.spec import LoadSpec
from arena.errors import ArenaError, DriverFailed
from arena.results.combine import combine, histograms
from arena.results.load_result import LoadResult, Phase, SeriesPoint
from arena.results.validity import validity_flags
from netns import Namespaces, end



# ---------------------------------------------------------------------- pure


def test_the_rate_connections_and_requests_are_split_to_sum_to_the_whole():
    spec = LoadSpec("http://127.0.0.1:1/", rate=300.0, connections=7, requests=10, duration_s=2.0, seed=5)
    parts = shares(spec, 3)
    assert [p.rate for p in parts] == [100.0] * 3 and sum(p.rate for p in parts) == spec.rate
    assert [p.connections for p in parts] == [3, 2, 2] and [p.requests for p in parts] == [4, 3, 3]
    assert [p.seed for p in parts] == [5, 6, 7]  # independent arrival processes
    assert all(p.allow_remote for p in parts)  # the target was checked against the cluster's hosts
    assert [stagger_s(spec, i) for i in range(3)] == [0.0, 1 / 300, 2 / 300]  # constant arrivals interleaved
    with pytest.raises(ArenaError, match="--connections 2 cannot be split over 3 load hosts"):
        shares(LoadSpec("http://127.0.0.1:1/", connections=2), 3)
    with pytest.raises(ArenaError, match="needs --duration"):
        shares(LoadSpec("http://127.0.0.1:1/", requests=100), 2)


def test_load_goes_to_loopback_or_a_host_of_the_cluster_and_nowhere_else():
    cluster = {"10.9.0.1", "10.9.0.11"}
    check_target("http://127.0.0.1:8080/", cluster)
    check_target("http://10.9.0.1:8080/", cluster)
    with pytest.raises(ArenaError, match="10.9.0.99 is neither loopback nor a host of the cluster"):
        check_target("http://10.9.0.99:8080/", cluster)
    with pytest.raises(ArenaError, match="'example.org' is not an IP address"):
        check_target("http://example.org/", cluster)


def _result(values_us: list[int], name_rps: float, started_at: float = 0.0, saturated: bool = False) -> LoadResult:
    h = histogram(values_us)
    phase = Phase(2.0, len(values_us), len(values_us), len(values_us), 0, 0, 0, name_rps, name_rps, {200: len(values_us)},
                  {}, {}, 100, 200, h, h, None, None)
    half = len(values_us) // 2
    series = [SeriesPoint(float(i), len(part), len(part), 0, None, None, None, max(part), histogram(part).hdr)
              for i, part in enumerate((values_us[:half], values_us[half:]))]
    return LoadResult("arena-load", "0.1.0", "open", "http://127.0.0.1:1/", 10, name_rps, False, phase, None, series,
                      0.1, 0.05, 50.0, None, saturated, ["CPU 99% busy"] if saturated else [],
                      config={"rate": name_rps, "connections": 10}, raw={"started_at": started_at})


def test_the_merged_histogram_is_the_histogram_of_every_hosts_samples():
    rng = random.Random(3)
    a = [int(rng.lognormvariate(8, 1)) for _ in range(5000)]
    b = [int(rng.lognormvariate(9, 0.5)) for _ in range(3000)]
    merged = histograms([histogram(a), histogram(b)])
    whole = histogram(a + b)
    assert merged.count == 8000 and merged.percentiles == whole.percentiles
    assert (merged.min, merged.max) == (whole.min, whole.max) and merged.mean == pytest.approx(whole.mean)
    both = combine([_result(a, 100.0), _result(b, 60.0, saturated=True)],
                   [{"name": "l1", "late_ms": 1.0}, {"name": "l2", "late_ms": 2.0 + LATE_MS, "problem": "started late"}])
    assert both.measured.completed == 8000 and both.rate == 160.0 and both.measured.status == {200: 8000}
    assert both.measured.response_time.percentiles == whole.percentiles
    for second, (part_a, part_b) in enumerate(((a[:2500], b[:1500]), (a[2500:], b[1500:]))):
        point, exact = both.series[second], histogram(part_a + part_b)
        assert point.completed == len(part_a) + len(part_b)
        assert (point.p50_us, point.p99_us, point.max_us) == (exact.p("50"), exact.p("99"), exact.max)
        assert point.histogram().percentiles == exact.percentiles
    assert both.saturation_reasons == ["host l2: CPU 99% busy"] and both.generator_cpu_s == pytest.approx(0.2)
    flags = validity_flags(both, error_threshold=0.01, drift_threshold=0.25, server_died=False, processes_lost=None)
    assert "load host l2: started late" in flags and any(f.startswith("generator saturated: host l2") for f in flags)


# ---------------------------------------------------------------------- across network namespaces


def _arena_loads_under(pids: list[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        try:
            found += [q for q in psutil.Process(pid).children(recursive=True) if q.name() == "arena-load"]
        except psutil.Error:
            pass
    return found


class _Unanswered:
    """A client whose every query of the scheduler goes unanswered (a stalled connection)."""

    def __init__(self):
        self.timeouts = []
        self.scheduler = type("Rpc", (), {"identity": staticmethod(lambda **kw: None)})()

    def sync(self, func, *args, callback_timeout=None, **kwargs):
        self.timeouts.append(callback_timeout)
        raise TimeoutError

    def close(self, timeout=None):
        self.timeouts.append(timeout)
        raise TimeoutError


def test_a_scheduler_that_never_answers_ends_the_run_at_its_deadline(monkeypatch):
    from arena.drivers import cluster as c

    monkeypatch.setattr(c, "POLL_S", 0.01)
    client, host = _Unanswered(), c.Host("tcp://10.0.0.2:4000", "load1", "10.0.0.2", True)
    running = type("Future", (), {"status": "pending"})()
    lost = c._watch(client, [running], [host], deadline=time.time() + 0.1)
    assert lost == f"load1: no result {c.SLACK_S:.0f} s past the run's end"
    # each query was bounded, none waited for an answer that never comes; nothing more is asked
    # through a scheduler that does not answer (the client has no run(): asking would fail here)
    assert not c._stop_all(client, [host], "r1")
    assert client.timeouts and set(client.timeouts) == {c.SCHEDULER_TIMEOUT_S}
    # a run whose first query goes unanswered fails, naming the scheduler, after one query; the
    # client's close waits no longer than a query
    monkeypatch.setattr(c, "connect", lambda address: client)
    client.timeouts.clear()
    with pytest.raises(DriverFailed, match=r"^--cluster tcp://10.0.0.1:8786: the scheduler did not answer within 10 s$"):
        c.run(LoadSpec(url="http://10.0.0.1:8080/"), "tcp://10.0.0.1:8786")
    assert client.timeouts == [c.SCHEDULER_TIMEOUT_S, c.SCHEDULER_TIMEOUT_S]


def test_the_clock_offsets_queries_of_the_scheduler_are_bounded(monkeypatch):
    from arena.drivers import cluster as c

    asked = []

    class Stalled:  # a client whose scheduler takes each query and never answers it
        def run(self, *args, callback_timeout=None, **kwargs):
            asked.append(callback_timeout)
            raise TimeoutError

    host = c.Host("tcp://10.0.0.2:4000", "load1", "10.0.0.2", True)
    with pytest.raises(TimeoutError):
        c.offsets(Stalled(), [host])
    assert asked == [c.SCHEDULER_TIMEOUT_S]


@pytest.mark.integration
def test_a_stopped_scheduler_is_said_within_the_connection_bound_not_waited_for(tmp_path):
    """A scheduler that takes a connection but never answers (stopped here): a client's own start
    waited for it for minutes."""
    import socket

    from arena.http_client import free_port
    from netns import VENV

    port = free_port("127.0.0.1")
    with open(tmp_path / "scheduler.log", "wb") as log:
        scheduler = subprocess.Popen([str(VENV / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                      "--no-dashboard"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=log, start_new_session=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 60
        while True:  # listening: the kernel takes its connections from now on, whatever it does
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and scheduler.poll() is None, (tmp_path / "scheduler.log").read_text()
                time.sleep(0.2)
        scheduler.send_signal(signal.SIGSTOP)
        began = time.monotonic()
        r = _arena("load", "http://127.0.0.1:9/", "--rate", "10", "--duration", "1s", "--cluster",
                   f"tcp://127.0.0.1:{port}", timeout=90)
        took = time.monotonic() - began
        assert r.returncode != 0
        assert f"--cluster tcp://127.0.0.1:{port}: the scheduler did not answer within 10 s" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and took < 45  # the 10 s bound and the start of python and Dask
    finally:
        scheduler.send_signal(signal.SIGCONT)
        end(scheduler)


def test_the_server_hosts_watch_ends_once_the_host_is_gone_or_the_scheduler_silent_past_its_wait(monkeypatch):
    from arena.app import remote
    from arena.drivers.cluster import Host
    from arena.errors import NotMeasured

    monkeypatch.setattr(remote, "LOOK_S", 0.0)
    host = Host("tcp://10.0.0.20:4000", "server", "10.0.0.20", True)
    silent = remote._Watch(_Unanswered(), "tcp://10.0.0.1:8786", host)
    silent.look()  # no answer, but not for STOP_WAIT_S yet
    silent.answered -= remote.STOP_WAIT_S + 1  # the last answer, that long ago
    with pytest.raises(NotMeasured, match=r"^--cluster tcp://10.0.0.1:8786: the scheduler did not answer within 10 s, "
                                          r"for 60 s mid-experiment: the runs on the server's host server \(10.0.0.20\) "
                                          r"are lost$"):
        silent.look()

    class Answers:
        scheduler = _Unanswered().scheduler

        def __init__(self, *addresses):
            self.workers = {a: {} for a in addresses}

        def sync(self, func, *args, callback_timeout=None, **kwargs):
            return {"workers": self.workers}

    remote._Watch(Answers(host.address, "tcp://10.0.0.11:4000"), "tcp://10.0.0.1:8786", host).look()  # still there
    with pytest.raises(NotMeasured, match=r"the server's host server \(10.0.0.20\) left the cluster mid-experiment"):
        remote._Watch(Answers("tcp://10.0.0.11:4000"), "tcp://10.0.0.1:8786", host).look()


def test_the_server_hosts_event_queue_is_made_within_the_schedulers_bound(monkeypatch, tmp_path):
    from arena.app import remote
    from arena.drivers.cluster import SCHEDULER_TIMEOUT_S

    class QueueUnanswered(_Unanswered):  # says who the workers are, never answers the queue's making
        asynchronous = False

        def sync(self, func, *args, callback_timeout=None, **kwargs):
            self.timeouts.append(callback_timeout)
            if func is self.scheduler.identity:
                return {"workers": {"tcp://10.0.0.20:4000": {"name": "server", "host": "10.0.0.20",
                                                             "resources": {"arena-server": 1}}}}
            raise TimeoutError

    client = QueueUnanswered()
    monkeypatch.setattr(remote, "connect", lambda address: client)
    with pytest.raises(ArenaError, match=r"^--cluster tcp://10.0.0.1:8786: the scheduler did not answer within 10 s$"):
        remote.run_on_server_host(str(tmp_path / "x.toml"), "x", str(tmp_path / "s.db"), "tcp://10.0.0.1:8786",
                                  lambda e: None, run=None)
    assert client.timeouts == [SCHEDULER_TIMEOUT_S] * 3  # the workers, the queue, the client's close


def test_the_load_hosts_and_where_load_may_go_come_from_one_list_of_workers():
    from arena.drivers.cluster import cluster_ips, hosts

    workers = {"tcp://10.0.0.20:1": {"name": "server", "host": "10.0.0.20", "resources": {"arena-server": 1}},
               "tcp://10.0.0.12:1": {"name": "load2", "host": "10.0.0.12", "resources": {"arena-load": 1}},
               "tcp://10.0.0.11:1": {"name": "load1", "host": "10.0.0.11", "resources": {"arena-load": 1}},
               "tcp://10.0.0.13:1": {"name": "other", "host": "10.0.0.13", "resources": {}}}
    # the marked load hosts, by name; the server's host and an unmarked worker are not load hosts
    assert [(h.name, h.ip, h.marked) for h in hosts(workers)] == [("load1", "10.0.0.11", True), ("load2", "10.0.0.12", True)]
    # none marked: every worker but the server's
    plain = {a: {**w, "resources": {}} if w["name"] != "server" else w for a, w in workers.items()}
    assert [h.name for h in hosts(plain)] == ["load1", "load2", "other"] and not hosts(plain)[0].marked
    assert cluster_ips("tcp://10.0.0.1:8786", workers) == {"10.0.0.1", "10.0.0.11", "10.0.0.12", "10.0.0.13", "10.0.0.20"}


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2's ip")
    spaces = Namespaces()
    try:
        spaces.create()
    except (subprocess.CalledProcessError, OSError) as e:
        spaces.close()
        why = (getattr(e, "stderr", "") or str(e)).strip()
        print(f"skipped: this machine cannot create network namespaces and a bridge: {why}")
        pytest.skip(f"cannot create network namespaces here: {why}")
    try:
        address, workers = spaces.cluster()
        yield spaces, address, workers
    finally:
        spaces.close()


@pytest.fixture(scope="module")
def server(cluster):
    from arena.servers.launch import ServerSpec, start

    spaces, _, _ = cluster
    with start(ServerSpec("gunicorn-gthread", "wsgi", processes=1, threads=4, cpus=[1], host=spaces.host_ip)) as running:
        yield running.url + "/work?cpu_ms=1&io_ms=2"


def _arena(*args: str, timeout: float = 120, cpus: str | None = None) -> subprocess.CompletedProcess:
    """``arena ARGS`` (on ``cpus``: taskset)."""
    pin = ["taskset", "-c", cpus] if cpus else []
    return subprocess.run([*pin, sys.executable, "-m", "arena", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.alone
def test_two_load_hosts_in_their_own_namespaces_load_one_server_merged_exactly(cluster, server, tmp_path):
    spaces, address, _ = cluster
    out = tmp_path / "load.json"
    r = _arena("load", server, "--rate", "100", "--duration", "2s", "--warmup", "0.5s", "--cluster", address,
               "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Load hosts:   2, merged exactly" in r.stdout
    doc = json.loads(out.read_text())
    merged, hosts = doc["merged"], doc["hosts"]
    assert sorted(h["ip"] for h in hosts) == sorted(spaces.ips)  # the load came from the namespaces
    per_host = [h["result"]["measured"]["requests"]["completed"] for h in hosts]
    assert merged["measured"]["completed"] == sum(per_host) and 190 <= sum(per_host) <= 210
    assert all(abs(h["rate"] - 50.0) < 1e-9 and h["late_ms"] is not None and h["late_ms"] < LATE_MS for h in hosts)
    print("hosts: " + "; ".join(f"{h['name']} start {h['late_ms']:+.1f} ms, offset {h['offset_ms']:+.2f} ms, "
                                f"round trip {h['rtt_ms']:.2f} ms" for h in hosts))
    # exact: the merged histogram's count is the hosts' counts, its percentiles those of all samples
    from hdrh.histogram import HdrHistogram

    each = [HdrHistogram.decode(h["result"]["measured"]["latency"]["response_time"]["hdr"]) for h in hosts]
    each[0].add(each[1])
    assert merged["measured"]["response_time"]["count"] == each[0].get_total_count() == sum(per_host)


@pytest.mark.integration
def test_a_load_host_lost_mid_run_fails_the_run_and_the_next_one_goes_on(cluster, server):
    spaces, address, workers = cluster
    arena = subprocess.Popen([sys.executable, "-m", "arena", "load", server, "--rate", "50", "--duration", "3s",
                              "--cluster", address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not _arena_loads_under([workers[1].pid]) and time.monotonic() < deadline and arena.poll() is None:
        time.sleep(0.05)
    assert _arena_loads_under([workers[1].pid]), "the second load host never started arena-load"
    end(workers[1])  # the worker and its arena-load: a host lost mid-run
    out, err = arena.communicate(timeout=60)
    assert arena.returncode == 1, out + err
    assert "load host load2" in err and "the other hosts' arena-load were stopped" in err
    gone = time.monotonic() + 10
    while _arena_loads_under([workers[0].pid]) and time.monotonic() < gone:
        time.sleep(0.05)
    assert not _arena_loads_under([workers[0].pid]), "the other host's arena-load still runs"
    # the next run goes on with the host that is left
    r = _arena("load", server, "--rate", "50", "--duration", "1s", "--cluster", address)
    # a generator late to its schedule on this box's crowded CPU 0 is flagged so (exit 1), as in
    # test_the_server_runs_on_its_own_host_and_the_runs_come_back; any other flag fails the test
    invalid = [line.removeprefix("INVALID: ") for line in r.stdout.splitlines() if line.startswith("INVALID: ")]
    crowded = bool(invalid) and all(reason.startswith("generator saturated") for reason in invalid[0].split("; "))
    assert r.returncode == (1 if crowded else 0) and "Load hosts:   1" in r.stdout, r.stdout + r.stderr


@pytest.mark.integration
def test_a_killed_coordinator_leaves_no_generator_running(cluster, server):
    spaces, address, workers = cluster
    arena = subprocess.Popen([sys.executable, "-m", "arena", "load", server, "--rate", "50", "--duration", "2s",
                              "--cluster", address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    alive = [w.pid for w in workers if w.poll() is None]
    deadline = time.monotonic() + 30
    while not _arena_loads_under(alive) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _arena_loads_under(alive), "no load host started arena-load"
    os.kill(arena.pid, signal.SIGKILL)
    arena.wait(timeout=10)
    # each arena-load ends at its run's end by itself: 2 s, its timeouts, no coordinator needed
    deadline = time.monotonic() + 2 + 30 + 5 + 5
    while _arena_loads_under(alive) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _arena_loads_under(alive)


@pytest.mark.integration
def test_an_experiments_cluster_loads_its_server_from_the_load_hosts(cluster, tmp_path):
    from arena.results.store import Store

    spaces, address, workers = cluster
    exp = _experiment(tmp_path, address, "60", server="here")
    store = tmp_path / "s.db"
    r = _arena("run", str(exp), "--store", str(store))
    assert r.returncode == 0, r.stdout + r.stderr
    (run,) = Store(str(store)).runs("apart")
    alive = sorted(ip for ip, w in zip(spaces.ips, workers) if w.poll() is None)
    assert run.valid and sorted(h["ip"] for h in run.load.hosts) == alive
    assert run.load.measured.completed == sum(h["completed"] for h in run.load.hosts) > 0
    assert (run.environment.cluster, run.environment.server_host) == (address, spaces.host_ip)


def test_a_cluster_table_names_a_scheduler_by_ip_and_port(tmp_path):
    from arena.plan.parse import load_experiment

    base = ('name = "x"\n[load]\nconcurrency = [1]\n[[servers]]\nserver = "puma"\napp = "rack"\n'
            '[layout]\nserver_cpus = "1"\nload_cpus = "0"\n')
    f = tmp_path / "x.toml"
    f.write_text(base + '[cluster]\naddress = "tcp://10.1.2.3:8786"\n')
    c = load_experiment(str(f)).cluster
    assert (c.address, c.server_host) == ("tcp://10.1.2.3:8786", "10.1.2.3")
    f.write_text(base + '[cluster]\naddress = "scheduler:8786"\n')
    with pytest.raises(ArenaError, match=r'x.toml:11: cluster.address = "scheduler:8786": a Dask scheduler\'s address'):
        load_experiment(str(f))
    f.write_text('driver = "wrk"\n' + base + '[cluster]\naddress = "tcp://10.1.2.3:8786"\n')
    with pytest.raises(ArenaError, match=r'driver = "wrk": several load hosts'):
        load_experiment(str(f))


@pytest.mark.integration
def test_ctrl_c_stops_every_hosts_generator_at_once(cluster, server):
    spaces, address, workers = cluster
    alive = [w.pid for w in workers if w.poll() is None]
    arena = subprocess.Popen([sys.executable, "-m", "arena", "load", server, "--rate", "50", "--duration", "30s",
                              "--cluster", address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(_arena_loads_under(alive)) < len(alive) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_arena_loads_under(alive)) == len(alive), "not every load host started arena-load"
    arena.send_signal(signal.SIGINT)
    out, err = arena.communicate(timeout=20)
    assert arena.returncode == 130, out + err
    gone = time.monotonic() + 10  # long before the run's 30 s would end it
    while _arena_loads_under(alive) and time.monotonic() < gone:
        time.sleep(0.05)
    assert not _arena_loads_under(alive), "a load host's arena-load runs on after Ctrl-C"


def _experiment(tmp_path: Path, address: str, rates: str, server: str = "worker", duration: str = "1s") -> Path:
    """A one-configuration experiment "apart" at open ``rates``, its load from the cluster's load hosts,
    its server ``here`` or on the server host's ``worker``."""
    exp = tmp_path / "apart.toml"
    exp.write_text(f"""name = "apart"
duration = "{duration}"
warmup = "0.5s"
repetitions = 1
speed_threshold = 10  # not about the machine: a spell must not fail it,
others_threshold = 1  # nor a neighbour
[workload]
path = "/work?cpu_ms=1&io_ms=2"
[load]
model = "open"
rates = [{rates}]
[cluster]
address = "{address}"
server = "{server}"
[[servers]]
server = "gunicorn-gthread"
app = "wsgi"
threads = 4
[layout]
server_cpus = "1"
load_cpus = "0"
""")
    return exp


@pytest.mark.integration
def test_the_server_runs_on_its_own_host_and_the_runs_come_back(cluster, tmp_path):
    """[cluster] server = "worker": the runs are made on the server host's worker (its own namespace and
    address), the load from the load hosts; the runs merged into this store, each naming both."""
    from arena.results.store import Store

    spaces, address, workers = cluster
    exp = _experiment(tmp_path, address, "40, 80")
    store = tmp_path / "s.db"
    # this coordinator on the load's CPU, as on a host of its own, away from the server's (the layout's
    # server CPU is the server host's): the only process on it beside the server is the server host's
    # worker, whose time there is Arena's own
    r = _arena("run", str(exp), "--store", str(store), cpus="0")
    runs = Store(str(store)).runs("apart")
    # Two load hosts, the scheduler and this coordinator share CPU 0 here: a run whose generator was
    # late to its schedule there is flagged so (and arena run exits 1), a finding of this 2-core box
    # and not of the cluster's; any other flag, or a run that did not come back, fails the test.
    crowded = [run for run in runs if not run.valid and all(f.kind == "generator saturated" for f in run.flags)]
    assert r.returncode == (1 if crowded else 0), r.stdout + r.stderr
    assert r.stdout.count("gunicorn-gthread[wsgi] t=4 r=") >= 2  # each run's line, as it was made there
    alive = sorted(ip for ip, w in zip(spaces.ips, workers) if w.poll() is None)
    assert len(runs) == 2 and all(run.valid or run in crowded for run in runs), [run.flags for run in runs]
    for run in runs:
        assert run.environment.server_host == spaces.server_ip and run.environment.cluster == address
        assert sorted(h["ip"] for h in run.load.hosts) == alive and all(h["rtt_ms"] > 0 for h in run.load.hosts)
    again = _arena("run", str(exp), "--store", str(store))  # resumed: nothing left to run, nothing twice
    assert again.returncode == 0 and len(Store(str(store)).runs("apart")) == 2, again.stdout + again.stderr


@pytest.mark.integration
def test_ctrl_c_keeps_the_runs_the_server_host_made_and_leaves_nothing_there(cluster, tmp_path):
    from arena.results.store import Store

    spaces, address, workers = cluster
    exp = _experiment(tmp_path, address, "40, 50, 60, 70, 80", duration="2s")
    store = tmp_path / "s.db"
    arena = subprocess.Popen([sys.executable, "-m", "arena", "run", str(exp), "--store", str(store)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, deadline = "", time.monotonic() + 120
    # a line that never comes holds readline() past the deadline: an arena still there then is killed
    watchdog = threading.Timer(150, arena.kill)
    watchdog.start()
    try:
        while "r=40 #1" not in seen and time.monotonic() < deadline and arena.poll() is None:
            seen += arena.stdout.readline()  # the first run's line: it was made, and came back
    finally:
        watchdog.cancel()
    assert "r=40 #1" in seen, seen
    arena.send_signal(signal.SIGINT)
    out, err = arena.communicate(timeout=120)
    assert arena.returncode == 130, seen + out + err
    kept = Store(str(store)).runs("apart")
    assert 1 <= len(kept) < 5  # what was measured before the stop is kept, the rest was not run
    host = spaces.server_worker.pid
    gone = time.monotonic() + 20
    while (psutil.Process(host).children(recursive=True) or _arena_loads_under([w.pid for w in workers]))\
            and time.monotonic() < gone:
        time.sleep(0.1)
    assert not psutil.Process(host).children(recursive=True), "the server host still runs a server"
    assert not _arena_loads_under([w.pid for w in workers])


@pytest.mark.integration
def test_a_server_host_lost_mid_experiment_ends_it_as_a_failed_measurement(cluster, tmp_path):
    """Its task would wait for a worker with the arena-server resource that never comes, and the
    coordinator with it: the coordinator sees the host leave and says so (exit 1)."""
    from distributed import Client

    spaces, address, workers = cluster
    exp = _experiment(tmp_path, address, "40, 50, 60, 70, 80", duration="2s")
    arena = subprocess.Popen([sys.executable, "-m", "arena", "run", str(exp), "--store", str(tmp_path / "s.db")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(240, arena.kill)  # a line that never comes, or an arena that never ends
    watchdog.start()
    try:
        seen, deadline = "", time.monotonic() + 120
        while "r=40 #1" not in seen and time.monotonic() < deadline and arena.poll() is None:
            seen += arena.stdout.readline()  # the first run made there: the experiment goes on the host
        assert "r=40 #1" in seen, seen
        end(spaces.server_worker)  # the host goes, and what ran on it
        lost = time.monotonic()
        out, err = arena.communicate(timeout=120)
        took = time.monotonic() - lost
    finally:
        watchdog.cancel()
        if arena.poll() is None:  # it did not end: nothing of this test's is left running
            arena.kill()
            arena.communicate()
        spaces.start_server_worker(address)  # for the tests after this one
        with Client(address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(sum(w.poll() is None for w in workers) + 1, timeout=60)
    assert arena.returncode == 1, seen + out + err
    assert (f"--cluster {address}: the server's host server ({spaces.server_ip}) left the cluster mid-experiment: "
            "the runs it made are lost") in err, err
    assert "Traceback" not in err and took < 60, (took, err)

