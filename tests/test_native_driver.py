"""The native driver: argv building (pure), and arena-load's real output validated against the
schema and parsed, against real subject servers."""

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena import stats
from arena.drivers.spec import LoadSpec
from arena.drivers import native
from arena.errors import ArenaError
from arena.servers.launch import ServerSpec, start
from tests.conftest import require_server


def test_build_argv_maps_every_option():
    spec = LoadSpec("http://127.0.0.1:9/x", connections=20, rate=500, arrival="poisson", requests=1000,
                           warmup_s=2, threads=2, headers=["A: b"], body="{}", method="POST", keep_alive=False,
                           request_start=True, timeout_s=3, seed=7)
    argv = native.build_argv(spec, Path("/bin/arena-load"), Path("/tmp/out.json"))
    assert argv[:4] == ["/bin/arena-load", "http://127.0.0.1:9/x", "-o", "/tmp/out.json"]
    pairs = dict(zip(argv[4::1], argv[5::1]))
    assert pairs["-c"] == "20" and pairs["-r"] == "500" and pairs["--arrival"] == "poisson"
    assert pairs["-n"] == "1000" and pairs["--warmup"] == "2s" and pairs["-t"] == "2" and pairs["--seed"] == "7"
    assert pairs["-H"] == "A: b" and pairs["--body"] == "{}" and pairs["-m"] == "POST" and pairs["--timeout"] == "3s"
    assert "-d" not in argv  # a count alone bounds the run
    assert "--no-keepalive" in argv and "--request-start" in argv and "--allow-remote" not in argv
    # neither bound given: ten seconds, like wrk
    default = native.build_argv(LoadSpec("http://h/"), Path("x"), Path("y"))
    assert default[default.index("-d") + 1] == "10.0s"


@pytest.fixture(scope="module")
def puma():
    require_server("puma")
    with start(ServerSpec("puma", "rack", processes=2, threads=2, cpus=[1])) as running:
        yield running


@pytest.mark.integration
def test_a_closed_run_against_a_real_server(puma):
    r = native.run(LoadSpec(f"{puma.url}/work?cpu_ms=3&io_ms=2", connections=4, duration_s=1.5,
                                   warmup_s=0.3, request_start=True), cpus=[0])
    m = r.measured
    assert r.model == "closed" and not r.interrupted and m.errors == 0 and m.completed > 50
    assert m.status == {200: m.completed}
    assert set(m.workers) <= set(puma.procset.pids()) and sum(m.workers.values()) == m.completed
    assert 3000 <= m.server_timing["cpu"].p("50") <= 3300  # the app's CPU, measured by the app
    assert "queue" in m.server_timing
    assert r.warmup is not None and r.warmup.completed > 0
    # each kept-alive connection's own requests, summed up: four connections, every answer counted
    spread = r.connection_spread
    assert spread.connections == 4 and sum(r.raw["per_connection"]["requests"]) == m.completed
    assert spread.rest_p99_us <= spread.worst_p99_us and spread.worst_requests > 0
    from arena.results.load_result import from_dict, to_dict
    assert from_dict(json.loads(json.dumps(to_dict(r)))).connection_spread == spread  # stored and read back
    # the encoded histogram decodes to the same percentiles
    h = m.response_time.decode()
    assert h.get_total_count() == m.response_time.count
    for name, q in (("50", 0.5), ("99", 0.99), ("99.9", 0.999), ("100", 1.0)):
        assert stats.hdr_value_at_quantile(h, q) == m.response_time.p(name)


@pytest.mark.integration
def test_live_points_arrive_during_the_run(puma):
    seen: list[tuple[float, object]] = []
    t0 = time.monotonic()
    r = native.run(LoadSpec(f"{puma.url}/work?cpu_ms=1", connections=2, duration_s=2.5), cpus=[0],
                   live=lambda p: seen.append((time.monotonic() - t0, p)))
    points = [p for _, p in seen]
    assert points and all(p in r.series for p in points)  # each live point is one of the result's
    assert len(points) >= len(r.series) - 1  # all but a last interval cut by the end
    assert seen[0][0] < 2.0  # the first second's figures came while the run was still going
    assert points[0].completed > 0 and points[0].p99_us is not None


@pytest.mark.alone
def test_an_open_run_reports_offered_and_achieved(puma):
    r = native.run(LoadSpec(f"{puma.url}/work?cpu_ms=1", rate=200, duration_s=1.0), cpus=[0])
    m = r.measured
    assert r.model == "open" and m.issued == 200 and m.completed + m.errors + m.unsent + m.in_flight == 200
    assert m.achieved_rps == pytest.approx(200, rel=0.02)
    assert r.schedule_lag is not None and r.saturated is False
    assert r.generator_pause_limit_ms == 100.0 and r.generator_paused_ms < r.generator_pause_limit_ms  # its own limit


@pytest.mark.alone
def test_a_far_client_is_measured_through_a_real_server(puma):
    """10 ms each way in front of a 5 ms request: p50 near 25 ms, and the result says how."""
    from arena.report.summary import load_summary

    r = native.run(LoadSpec(f"{puma.url}/work?io_ms=5", connections=2, duration_s=1.0, warmup_s=0.3, delay_s=0.01),
                   cpus=[0])
    near = native.run(LoadSpec(f"{puma.url}/work?io_ms=5", connections=2, duration_s=1.0, warmup_s=0.3), cpus=[0])
    far_ms, near_ms = r.measured.response_time.p("50") / 1e3, near.measured.response_time.p("50") / 1e3
    assert 19.5 <= far_ms - near_ms <= 21.5, (far_ms, near_ms)
    assert r.settings.link_delay_s == 0.01
    assert "keep-alive, 10 ms away" in load_summary(r)


def test_a_result_that_breaks_the_schema_is_refused(puma):
    r = native.run(LoadSpec(f"{puma.url}/health", connections=1, requests=5))
    doc = copy.deepcopy(r.raw)
    native.validate(doc)
    del doc["measured"]["latency"]["service_time"]
    with pytest.raises(ArenaError, match=r"^arena-load result: measured/latency: 'service_time' is a required property"):
        native.validate(doc)
    doc = copy.deepcopy(r.raw)
    doc["measured"]["status"]["abc"] = 1
    with pytest.raises(ArenaError, match="^arena-load result: measured/status"):
        native.validate(doc)


@pytest.mark.integration
def test_arena_loads_document_matches_the_schema_in_each_model_and_link(puma):
    """Closed with a warm-up, open with Poisson arrivals and X-Request-Start, and through an emulated
    link: each document is what schemas/load-result.schema.json says (native.run validates it; so
    does every run of the suite, interrupted, invalid or with a session's capture missed)."""
    url = f"{puma.url}/work?cpu_ms=1"
    closed = native.run(LoadSpec(url, connections=2, duration_s=0.5, warmup_s=0.2), cpus=[0])
    opened = native.run(LoadSpec(url, rate=200, arrival="poisson", requests=50, request_start=True), cpus=[0])
    linked = native.run(LoadSpec(url, connections=2, requests=20, delay_s=0.001, upload_bps=1_000_000,
                                 download_bps=1 << 20), cpus=[0])
    for r in (closed, opened, linked):
        native.validate(r.raw)
    assert closed.warmup is not None and closed.measured.completed > 0
    assert opened.model == "open" and opened.measured.issued == 50 and "queue" in opened.measured.server_timing
    assert linked.settings.link_delay_s == 0.001 and linked.measured.completed == 20


def test_arena_load_errors_become_one_line_arena_errors():
    with pytest.raises(ArenaError, match=r"^URL: 10\.9\.9\.9 is not a loopback address"):
        native.run(LoadSpec("http://10.9.9.9/", duration_s=1))


@pytest.mark.integration
def test_ctrl_c_to_arena_load_keeps_the_partial_result(puma):
    """SIGINT to the process group, as a terminal's Ctrl-C: both Arena and arena-load get it."""
    proc = subprocess.Popen([sys.executable, "-m", "arena", "load", f"{puma.url}/work?cpu_ms=1", "-c", "2", "-d", "60s",
                             "--json", "/dev/stdout"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    # Ctrl-C once the server has spent 0.3 s of CPU on this load (each request costs it at least 1 ms):
    # however long the interpreter takes to start, well over 50 requests are then answered
    before = sum(puma.procset.cpu_times())
    deadline = time.monotonic() + 30
    while sum(puma.procset.cpu_times()) - before < 0.3:
        assert proc.poll() is None and time.monotonic() < deadline, "the load never reached the server"
        time.sleep(0.05)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 130, err.decode()
    text = out.decode()
    assert "[INTERRUPTED: partial result]" in text
    completed = int(re.search(r"Requests:\s+(\d+) completed", text).group(1))
    assert completed > 50
    doc = json.loads(text[: text.index("arena-load 0")])  # the --json copy comes first
    native.validate(doc)
    assert doc["interrupted"] is True and doc["measured"]["requests"]["completed"] == completed


def test_the_connection_spread_sets_the_worst_tenth_against_the_rest():
    from arena.results.load_result import ConnectionSpread

    per = {"requests": [50] * 18 + [3, 4], "p50_us": [1000] * 20, "p99_us": [2000 + i for i in range(18)] + [90_000, 250_000],
           "untracked": 0}
    s = ConnectionSpread.of(per)
    # twenty connections: the worst tenth is two, their median p99 170 ms; the others' median 2.0085
    # ms; the fastest quarter is five, their median 2.002 ms
    assert (s.connections, s.worst_p99_us, s.rest_p99_us, s.worst_requests, s.rest_requests) == (
        20, 170_000, 2008.5, 3.5, 50)
    assert (s.fastest_p99_us, s.fastest_requests) == (2002, 50)
    assert ConnectionSpread.of({"requests": [1], "p50_us": [1], "p99_us": [1], "untracked": 0}) is None
    assert ConnectionSpread.of(None) is None
