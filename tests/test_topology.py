"""The deployment topology: a front's settings and their checks, the configs written for nginx and
HAProxy (one test per option), the balancer's log read back, the servers' unix-socket binding; then
the real thing: nginx and HAProxy started, ready, stopped and crashed at start with nothing left, and
a two-instance fleet answering through HAProxy with per-instance counts that add up."""

import os
import shutil
from pathlib import Path

import pytest

from arena.drivers import DRIVERS
from arena.drivers.spec import LoadSpec
from arena.errors import ArenaError
from arena.plan.parse import parse_experiment
from arena.servers import catalog
from arena.servers.cgroup import survivors
from arena.servers.launch import ServerSpec
from arena.subjects import APPS
from arena.topology import Topology, haproxy, instance_cpus, nginx, topology
from arena.topology.deployment import start_deployment
from tests.conftest import require_server

WORKDIR = Path("/tmp/arena-x")


# ---------------------------------------------------------------------- settings


def test_a_topology_names_its_front_and_what_differs_from_the_defaults():
    assert Topology().text == "" and Topology().front is None
    assert topology({"proxy": "nginx"}).text == "via nginx"
    assert topology({"proxy": "nginx", "buffering": False, "upstream": "unix"}).text == \
        "via nginx(buffering=off, upstream=unix)"
    fleet = topology({"balancer": "haproxy", "instances": 4, "balance": "random(2)", "maxconn": 1})
    assert fleet.text == "4x via haproxy(random(2), maxconn=1)" and fleet.front == "haproxy"


@pytest.mark.parametrize("given, message", [
    ({"proxy": "nginx", "balancer": "haproxy"}, "balancer: give a proxy or a balancer in front, not both"),
    ({"instances": 2}, "instances: more than one instance needs a balancer"),
    ({"buffering": False}, "buffering: applies to a proxy"),
    ({"proxy": "nginx", "maxconn": 1}, "maxconn: applies to a balancer"),
    ({"upstream": "unix"}, "upstream: applies to a proxy or a balancer"),
    ({"balancer": "haproxy", "balance": "first"}, 'balance: must be "roundrobin", "leastconn", "random", "random(2)"'),
    ({"balancer": "haproxy", "instances": 0}, "instances: must be a whole number from 1 to 64"),
    ({"proxy": "apache"}, 'proxy: must be "nginx"'),
    ({"balancer": "haproxy", "maxconn": True}, "maxconn: must be a whole number"),
])
def test_a_topology_refuses_what_cannot_run(given, message):
    with pytest.raises(ArenaError) as e:
        topology(given)
    assert str(e.value).startswith(message)


def test_instances_share_the_server_cpus_or_split_them():
    fleet = topology({"balancer": "haproxy", "instances": 2})
    assert instance_cpus([2, 3], fleet) == [[2, 3], [2, 3]]
    split = topology({"balancer": "haproxy", "instances": 2, "instance_cpus": "split"})
    assert instance_cpus([1, 2, 3, 4], split) == [[1, 3], [2, 4]]
    with pytest.raises(ArenaError, match="2 instances need at least 2 server CPUs"):
        instance_cpus([1], split)


# ---------------------------------------------------------------------- configs (pure)


def _nginx(**given) -> str:
    return nginx.config(topology({"proxy": "nginx", **given}), "127.0.0.1", 8080, "127.0.0.1:9000", WORKDIR, 2, "root")


def test_nginx_config_listens_passes_and_keeps_its_files_in_its_dir():
    text = _nginx()
    assert "listen 127.0.0.1:8080 backlog=4096;" in text and "server 127.0.0.1:9000;" in text
    assert "worker_processes 2;" in text and "user root;" in text and "daemon off;" in text
    assert "access_log off;" in text and f"pid {WORKDIR}/nginx.pid;" in text
    paths = [line.split()[1].rstrip(";") for line in text.splitlines() if "_path " in line or line.strip().startswith("pid ")]
    assert paths and all(p.startswith(str(WORKDIR)) for p in paths)
    assert "user" not in nginx.config(topology({"proxy": "nginx"}), "::1", 1, "x:1", WORKDIR, 1, None).split("daemon")[0]
    assert "listen [::1]:1 " in nginx.config(topology({"proxy": "nginx"}), "::1", 1, "x:1", WORKDIR, 1, None)


@pytest.mark.parametrize("on", [True, False])
def test_nginx_buffering(on):
    text = _nginx(buffering=on)
    word = "on" if on else "off"
    assert f"proxy_buffering {word};" in text and f"proxy_request_buffering {word};" in text


@pytest.mark.parametrize("on", [True, False])
def test_nginx_upstream_keepalive(on):
    text = _nginx(upstream_keepalive=on)
    assert ("keepalive 64;" in text) == on
    assert ("proxy_http_version 1.1;" in text and 'proxy_set_header Connection "";' in text) == on


def test_nginx_upstream_on_a_unix_socket():
    text = nginx.config(topology({"proxy": "nginx", "upstream": "unix"}), "127.0.0.1", 1, "/tmp/a/server.sock",
                        WORKDIR, 1, None)
    assert "server unix:/tmp/a/server.sock;" in text


def _haproxy(**given) -> str:
    return haproxy.config(topology({"balancer": "haproxy", "instances": 2, **given}), "127.0.0.1", 8080,
                          ["127.0.0.1:9000", "/tmp/b/server.sock"], WORKDIR, 2, 9950)


@pytest.mark.parametrize("policy", ["roundrobin", "leastconn", "random", "random(2)"])
def test_haproxy_balance(policy):
    assert f"    balance {policy}\n" in _haproxy(balance=policy)


def test_haproxy_servers_limits_and_log():
    text = _haproxy(maxconn=1)
    assert "    server i0 127.0.0.1:9000 maxconn 1\n" in text and "    server i1 /tmp/b/server.sock maxconn 1\n" in text
    assert "server i0 127.0.0.1:9000\n" in _haproxy()  # no limit unless asked
    assert "bind 127.0.0.1:8080" in text and "nbthread 2" in text and "maxconn 9950" in text
    assert f'log-format "{haproxy.LOG_FORMAT}"' in text and "log stdout format raw" in text
    assert f"stats socket {WORKDIR}/stats.sock" in text
    assert haproxy.max_connections(20000) == 9950 and haproxy.max_connections(10**7) == 100_000


LOG = """\
[NOTICE]   (1) : haproxy version is 2.6.12
24/Nov/2026:10:00:00.000 i0 0 0 5 5 200
24/Nov/2026:10:00:00.500 i1 10 0 5 15 200
24/Nov/2026:10:00:01.000 i0 30 1 5 36 200
24/Nov/2026:10:00:01.200 <NOSRV> -1 -1 -1 3 503
24/Nov/2026:10:00:02.000 i1 7 0 5 12 200
"""


def test_the_balancers_log_read_back_in_a_window():
    lines = haproxy.parse_log(LOG)
    assert len(lines) == 5 and lines[1].instance == "i1" and lines[1].queue_ms == 10 and lines[3].status == 503
    t0 = lines[0].received_s
    assert lines[1].received_s - t0 == pytest.approx(0.5)
    got = haproxy.window_figures(lines, t0 + 0.1, t0 + 2.0, 2)  # the second to the fourth line
    assert got["requests"] == 3 and got["unserved"] == 1
    assert got["queue_ms"] == {"mean": 20.0, "p50": 10, "p99": 30, "max": 30}
    assert [(i["instance"], i["requests"], i["queue_ms_mean"]) for i in got["instances"]] == [("i0", 1, 30.0),
                                                                                              ("i1", 1, 10.0)]


# ---------------------------------------------------------------------- unix sockets and the plan


@pytest.mark.parametrize("name", [n for n, s in catalog.CATALOG.items() if s.unix is not None])
def test_a_server_that_can_binds_the_socket_instead_of_the_port(name):
    server = catalog.CATALOG[name]
    app = APPS[server.apps[0]]
    knobs = catalog.resolve_knobs(server, app, {}, {})
    cmd = catalog.build_command(server, app, knobs, host="127.0.0.1", port=4321, workdir=WORKDIR,
                                socket="/tmp/s/server.sock")
    text = " ".join(cmd.argv) + "".join(cmd.files.values())
    assert "/tmp/s/server.sock" in text and "4321" not in text


def test_a_server_that_cannot_is_refused():
    with pytest.raises(ArenaError, match="webrick cannot listen on a unix socket"):
        catalog.unix_bound(catalog.CATALOG["webrick"])


BASE = {"name": "t", "load": {"concurrency": [4]}, "workload": {"path": "/"}}


def test_an_experiments_topology_is_a_grid_axis_under_its_default():
    exp = parse_experiment({**BASE, "topology": {"proxy": "nginx"},
                            "servers": [{"server": "unicorn", "topology": {"buffering": [True, False]}},
                                        {"server": "puma"}]}, "t.toml")
    names = [c.key for c in exp.servers]
    assert "unicorn[rack] via nginx" in names and "unicorn[rack] via nginx(buffering=off)" in names
    assert any(n.startswith("puma[rack]") and n.endswith("via nginx") for n in names)
    fleet = parse_experiment({**BASE, "servers": [{"server": "gunicorn-sync", "topology": {
        "balancer": "haproxy", "instances": 4, "balance": ["random", "leastconn"], "maxconn": 1}}]}, "t.toml")
    assert [c.key for c in fleet.servers] == ["gunicorn-sync[wsgi] 4x via haproxy(random, maxconn=1)",
                                              "gunicorn-sync[wsgi] 4x via haproxy(leastconn, maxconn=1)"]


@pytest.mark.parametrize("servers, top, message", [
    ([{"server": "webrick", "topology": {"proxy": "nginx", "upstream": "unix"}}], {},
     't.toml: servers[0].topology.upstream = "unix": webrick cannot listen on a unix socket here'),
    ([{"server": "puma"}], {"balance": "nope"}, 't.toml: topology.balance = "nope": must be "roundrobin"'),
    ([{"server": "puma", "topology": {"instances": 3}}], {},
     "t.toml: servers[0].topology.instances = 3: more than one instance needs a balancer"),
    ([{"server": "puma", "topology": "nginx"}], {}, 't.toml: servers[0].topology = "nginx": must be a table'),
])
def test_an_experiments_topology_errors_are_one_line(servers, top, message):
    with pytest.raises(ArenaError) as e:
        parse_experiment({**BASE, "servers": servers, **({"topology": top} if top else {})}, "t.toml")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


# ---------------------------------------------------------------------- the real fronts


def _nothing_left(deployment) -> None:
    parts = [*deployment.instances, deployment.front]
    for p in parts:
        assert survivors(p.procset.name) == [] and not p.workdir.exists()
    assert all(i.socket is None or not Path(i.socket).exists() for i in deployment.instances)


@pytest.mark.integration
@pytest.mark.parametrize("given", [{"proxy": "nginx"}, {"proxy": "nginx", "upstream": "unix", "buffering": False},
                                   {"balancer": "haproxy", "instances": 2, "upstream": "unix"}],
                         ids=["nginx-tcp", "nginx-unix", "haproxy-unix"])
def test_a_front_starts_answers_through_its_instances_and_stops_leaving_nothing(given):
    require_server("gunicorn-sync")
    from arena.http_client import Client

    from arena.http_client import free_port

    port = free_port("127.0.0.1")  # the deployment's address is its front's
    with start_deployment(ServerSpec("gunicorn-sync", cpus=[1], port=port), topology(given), [1]) as d:
        assert d.port == d.front.port == port and all(i.port != port for i in d.instances)
        assert d.front.alive() and d.front.procset.pids() and d.alive()
        assert all(Path(i.socket).is_socket() for i in d.instances if i.socket)
        seen = set()
        for _ in range(6):
            with Client(d.front.host, d.front.port) as c:
                reply = c.get("/work?cpu_ms=1")
                assert reply.status == 200
                seen.add(int(reply.headers["x-arena-pid"]))
        assert seen <= set(d.procset.pids()) and len(seen) == len(d.instances)  # every instance served
        assert d.described()["front"]["kind"] == d.front.kind
    _nothing_left(d)


def _own_workdirs() -> set[Path]:
    """The work dirs of this process's sets in /tmp (a set is named after the process that made it:
    another test's, running beside this one, are not this one's to count)."""
    return set(Path("/tmp").glob(f"arena-{os.getpid()}-*"))


def test_a_port_in_use_is_refused_before_any_instance_starts():
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        before = _own_workdirs()
        with pytest.raises(ArenaError, match=rf"^--port: 127.0.0.1:{port} is in use"):
            start_deployment(ServerSpec("gunicorn-sync", cpus=[1], port=port), topology({"proxy": "nginx"}), [1])
        assert _own_workdirs() == before


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["nginx", "haproxy"])
def test_a_front_that_crashes_at_start_is_one_error_and_leaves_nothing(kind, monkeypatch):
    require_server("gunicorn-sync")
    module = nginx if kind == "nginx" else haproxy
    monkeypatch.setattr(module, "config", lambda *a, **k: "this is not a config\n")
    given = {"proxy": "nginx"} if kind == "nginx" else {"balancer": "haproxy"}
    before = _own_workdirs()
    with pytest.raises(ArenaError) as e:
        start_deployment(ServerSpec("gunicorn-sync", cpus=[1]), topology(given), [1])
    assert f"{kind} exited with code" in str(e.value) and "before it was ready" in str(e.value)
    assert _own_workdirs() - before == set()  # neither the front's dir nor the instance's


@pytest.mark.integration
def test_a_fleet_behind_haproxy_serves_every_request_once_counted_per_instance():
    """200 requests through HAProxy (round robin over 2 connections): each instance served
    half, and the balancer's log counts every one."""
    require_server("gunicorn-sync")
    fleet = topology({"balancer": "haproxy", "instances": 2})
    with start_deployment(ServerSpec("gunicorn-sync", cpus=[1]), fleet, [1]) as d:
        result = DRIVERS["arena-load"].run(LoadSpec(url=d.url + "/work?cpu_ms=1", connections=2, requests=200,
                                                    timeout_s=10), cpus=[0])
        figures = d.window(0, float("inf"))
    assert result.measured.completed == 200 and result.measured.errors == 0
    counts = [i["requests"] for i in figures["instances"]]
    assert figures["requests"] == 201 and sum(counts) == 201  # and the ready check's GET
    assert all(abs(c - 100) <= 1 for c in counts)
    _nothing_left(d)


def test_make_install_puts_both_fronts_here():
    """make install puts both fronts on the machine (the studies need them)."""
    assert shutil.which("nginx") and shutil.which("haproxy")


@pytest.mark.integration
def test_a_fleet_run_is_stored_with_the_balancers_figures_and_reported(tmp_path):
    """A real run through the runner: the run keeps the balancer's per-instance counts over its window,
    the cell aggregates them, and the report draws the chain and tabulates them."""
    require_server("gunicorn-sync")
    from arena.app.storage import results
    from arena.results.store import Store
    from arena.runner import run_experiment

    exp = parse_experiment({"name": "fleet", "duration": "1.5s", "warmup": "0.5s", "repetitions": 1,
                            "speed_threshold": 10, "others_threshold": 1, "workload": {"path": "/work?cpu_ms=1&io_ms=2"},
                            "load": {"concurrency": [3]},
                            "servers": [{"server": "gunicorn-sync", "topology": {
                                "balancer": "haproxy", "instances": 2, "balance": "leastconn", "upstream": "unix"}}]},
                           str(tmp_path / "fleet.toml"))
    with Store(tmp_path / "s.db") as store:
        counts = run_experiment(exp, store)
        res = results(store, "fleet")
    assert counts.done == 1 and counts.failed == 0
    run = res.runs[0]
    logged = run.topology
    assert [i["instance"] for i in logged["instances"]] == ["i0", "i1"]
    assert sum(i["requests"] for i in logged["instances"]) == logged["requests"] > 0
    # the balancer's window is the probe's: the requests it logged are the generator's, give or take
    # the few in flight at either edge of the window
    assert abs(logged["requests"] - run.load.measured.completed) <= 3 + 0.05 * run.load.measured.completed
    assert "haproxy" in run.services and run.launch["front"]["kind"] == "haproxy"
    cell = res.cells[0]
    assert cell.front is not None and sum(cell.front.shares) == pytest.approx(100)
    from arena.app.report import build_report

    section = next(s for s in build_report(res).sections if s.key == "topology")
    chain_row = section.tables[0].rows[0]
    assert chain_row[0] == cell.label and "-> haproxy" in chain_row[1] and "2 x gunicorn-sync" in chain_row[1]
    assert "unix sockets" in chain_row[1]
    assert section.tables[1].rows[0][7].count("/") == 1  # two instances' shares
