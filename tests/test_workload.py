"""The Python workload's pure logic against known values (the contract is spec.md)."""

import os
import random
import statistics
import subprocess
import sys
import time

import pytest

from arena.subjects.python import workload as w


def serve(url: str, request_start: str | None = None) -> w.Response:
    path, _, query = url.partition("?")
    return w.run_sync(path, query, request_start, "wsgi")


def endpoint_of(resp: w.Response) -> str:
    return dict(resp.headers)["X-Arena-Endpoint"]


@pytest.mark.parametrize("name, raw, value", [
    ("cpu_ms", "20", 20.0), ("cpu_ms", "0.5", 0.5), ("cpu_ms", "1e3", 1000.0), ("cpu_ms", "10000", 10000.0),
    ("io_ms", "60000", 60000.0), ("bytes", "10485760", 10485760), ("bytes", "0", 0), ("io", "block", "block"),
    ("cpu_dist", "lognormal", "lognormal"), ("sigma", "4", 4.0),
])
def test_work_parameters_within_bounds(name, raw, value):
    assert w.endpoint_args("work", {name: raw})[name] == value


@pytest.mark.parametrize("name, raw, message", [
    ("cpu_ms", "abc", "cpu_ms: must be a number from 0 to 10000, got 'abc'"),
    ("cpu_ms", "999999", "cpu_ms: must be a number from 0 to 10000, got '999999'"),
    ("cpu_ms", "-1", "cpu_ms: must be a number from 0 to 10000, got '-1'"),
    ("cpu_ms", "nan", "cpu_ms: must be a number from 0 to 10000, got 'nan'"),
    ("cpu_ms", "", "cpu_ms: must be a number from 0 to 10000, got ''"),
    ("io_ms", "60000.5", "io_ms: must be a number from 0 to 60000, got '60000.5'"),
    ("bytes", "1.5", "bytes: must be an integer from 0 to 10485760, got '1.5'"),
    ("bytes", "10485761", "bytes: must be an integer from 0 to 10485760, got '10485761'"),
    ("io", "fast", "io: must be 'sleep' or 'block', got 'fast'"),
    ("io_dist", "normal", "io_dist: must be 'fixed' or 'exp' or 'lognormal' or 'uniform', got 'normal'"),
])
def test_work_parameters_out_of_bounds_name_the_parameter_and_bound(name, raw, message):
    with pytest.raises(w.BadRequest) as e:
        w.endpoint_args("work", {name: raw})
    assert str(e.value) == message


def test_defaults_and_unknown_parameters():
    assert w.endpoint_args("work", {}) == {"cpu_ms": 0, "io_ms": 0, "io_min_ms": 0, "bytes": 0, "io": "sleep",
                                           "cpu_dist": "fixed", "io_dist": "fixed", "sigma": 1.0}
    with pytest.raises(w.BadRequest, match="^cpu: unknown parameter for /work"):
        w.endpoint_args("work", {"cpu": "1"})
    with pytest.raises(w.BadRequest, match=r"^min: must be <= max \(2\), got '5'"):
        w.endpoint_args("json", {"min": "5", "max": "2"})


def test_mix_prefixed_parameter_wins_and_unprefixed_applies_to_all():
    query = {"w_sort": "1", "w_fib": "1", "n": "7", "sort.n": "50"}
    assert w.mix_args(query) == ({"sort": 1.0, "fib": 1.0}, None)
    assert w.endpoint_args("sort", query, prefixed=True) == {"n": 50}
    assert w.endpoint_args("fib", query, prefixed=True) == {"n": 7}
    with pytest.raises(w.BadRequest, match="^sort.n: must be an integer"):
        w.endpoint_args("sort", {"sort.n": "x"}, prefixed=True)


@pytest.mark.parametrize("query, message", [
    ({}, "w_*: at least one endpoint weight must be above 0"),
    ({"w_fib": "0"}, "w_*: at least one endpoint weight must be above 0"),
    ({"w_nope": "1"}, "w_nope: unknown endpoint weight"),
    ({"w_fib": "1", "seed": "-3"}, "seed: must be an integer from 0 to"),
    ({"w_fib": "1", "fib.digits": "3"}, "fib.digits: unknown parameter for /mix"),
])
def test_mix_errors(query, message):
    with pytest.raises(w.BadRequest) as e:
        w.mix_args(query)
    assert str(e.value).startswith(message)


def test_a_stream_yields_its_parts_and_waits_in_order_and_times_itself_at_its_end():
    """/stream: the opening comment at once, each event after its wait (first_ms, then interval_ms)
    and its CPU, then the closing comment with the stream's own timing; never drawn by /mix."""
    resp = w.run_sync("/stream", "events=3&first_ms=30&interval_ms=20&cpu_ms=2&bytes=4", None, "wsgi")
    assert (resp.status, resp.content_type, resp.body) == (200, "text/event-stream", b"")
    assert "Content-Length" not in dict(w.wire_headers(resp)) and dict(resp.headers)["Cache-Control"] == "no-cache"
    assert "Server-Timing" not in dict(resp.headers) and "X-Accel-Buffering" not in dict(resp.headers)
    parts = list(resp.stream)
    assert parts[:-1] == [b": stream\n\n", w.Wait(0.03), b"id: 1\ndata: xxxx\n\n", w.Wait(0.02),
                          b"id: 2\ndata: xxxx\n\n", w.Wait(0.02), b"id: 3\ndata: xxxx\n\n"]
    closing = dict(p.split(";dur=") for p in parts[-1].removeprefix(b": server-timing ").decode().strip().split(", "))
    assert 6 <= float(closing["cpu"]) <= 9 and float(closing["io"]) < 5  # the waits were not slept: parts were taken at once
    timed = w.run_sync("/stream", "events=1&buffering=no", "t=1", "asgi")
    assert dict(timed.headers)["X-Accel-Buffering"] == "no" and dict(timed.headers)["Server-Timing"].startswith("queue;dur=")
    assert [p for p in w.sync_parts(timed.stream)][:2] == [b": stream\n\n", b"id: 1\ndata: xxxxxxxxxxxxxxxx\n\n"]
    for query, message in (("events=0", "events: must be an integer from 1 to 100000"),
                           ("bytes=65537", "bytes: must be an integer from 0 to 65536")):
        assert w.run_sync("/stream", query, None, "wsgi").body.decode().startswith(message)
    with pytest.raises(w.BadRequest, match="^w_stream: unknown endpoint weight"):
        w.mix_args({"w_stream": "1"})
    with pytest.raises(w.BadRequest, match="^events: unknown parameter for /mix"):
        w.mix_args({"w_fib": "1", "events": "3"})


def test_a_stream_delivered_as_made_streams_and_one_held_says_what_arrived_when():
    from arena.http_client import Streamed
    from arena.subjects.conformance import delivery

    def streamed(*ms: float) -> Streamed:
        return Streamed(200, {}, b"", [(0.001, b": stream")] + [(t / 1000, b"id: %d\ndata: x" % i) for i, t in enumerate(ms, 1)])

    assert delivery(streamed(61, 102, 143)) == "streams"
    assert delivery(streamed(150, 150.4, 151)) == ("holds a stream: its 3 events, made 40 ms apart, arrived together "
                                                   "at 150-151 ms (the first made at 60 ms)")
    assert delivery(streamed(61, 102)) == "unknown: 2 of 3 events arrived"


def test_mix_draws_follow_the_weights_and_a_seed_repeats_per_stream():
    w._seeded.clear()
    endpoints = [endpoint_of(serve("/mix?w_health=3&w_server=1&seed=11")) for _ in range(4000)]
    share = endpoints.count("health") / len(endpoints)
    assert 0.72 <= share <= 0.78  # 0.75 expected; the binomial sd is 0.007
    w._seeded.clear()  # a new stream with the same seed repeats the sequence
    again = [endpoint_of(serve("/mix?w_health=3&w_server=1&seed=11")) for _ in range(4000)]
    assert again == endpoints


def test_fib_and_pi_known_values():
    assert [w.fib(n) for n in range(10)] == [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]
    assert w.fib(90) == 2880067194370816120
    assert w.fib(1000).bit_length() == 694
    assert w.pi_digits(1) == "3.1"
    assert w.pi_digits(50) == "3.14159265358979323846264338327950288419716939937510"
    # decimals 989-1000 of pi, from mpmath: mp.dps = 1010; nstr(mp.pi, 1005)[:1002][-12:]
    assert w.pi_digits(1000).endswith("092164201989")
    assert len(w.pi_digits(10000)) == 10002


@pytest.mark.parametrize("dist", ["exp", "lognormal", "uniform"])
def test_distributions_keep_the_mean(dist):
    rng = random.Random(1)
    draws = [w.sample(10.0, dist, 0.8, 1e9, rng) for _ in range(40000)]
    assert statistics.fmean(draws) == pytest.approx(10.0, rel=0.03)
    assert statistics.pstdev(draws) > 3  # really random, not the mean every time


def test_uniform_draws_span_zero_to_twice_the_mean():
    rng = random.Random(3)
    draws = [w.sample(80.0, "uniform", 1.0, 1e9, rng) for _ in range(20000)]
    assert 0 <= min(draws) < 1 and 159 < max(draws) <= 160
    # its spread: a uniform's standard deviation is its width / sqrt(12)
    assert statistics.pstdev(draws) == pytest.approx(160 / 12 ** 0.5, rel=0.03)


def test_distribution_draws_are_clipped_to_the_bound():
    rng = random.Random(2)
    assert max(w.sample(50.0, "exp", 1.0, 60.0, rng) for _ in range(2000)) == 60.0
    assert w.sample(7.0, "fixed", 1.0, 60.0, rng) == 7.0


def test_burn_cpu_burns_thread_cpu_time():
    t0 = time.thread_time()
    w.burn_cpu(0.03)
    used = time.thread_time() - t0
    assert 0.03 <= used < 0.035


@pytest.mark.parametrize("header, seconds", [
    ("t=1700000000123456", 1700000000.123456), ("t=1700000000123", 1700000000.123),
    ("t=1700000000", 1700000000.0), ("t=1700000000.250", 1700000000.25), ("1700000000123456", 1700000000.123456),
])
def test_request_start_formats(header, seconds):
    assert w.parse_request_start(header) == pytest.approx(seconds, abs=1e-6)


def test_request_start_bad_value_is_a_400_naming_the_header():
    assert serve("/health", "t=soon").status == 400
    assert serve("/health", "t=soon").body == b"X-Request-Start: must be t=<microseconds since the epoch>, got 't=soon'\n"


def test_work_response_timing_and_headers():
    stamp = f"t={int((time.time() - 0.02) * 1e6)}"
    resp = serve("/work?cpu_ms=10&io_ms=15&bytes=123", stamp)
    assert resp.status == 200 and resp.body == b"x" * 123
    header = dict(resp.headers)["Server-Timing"]
    timing = {p.split(";")[0]: float(p.split("dur=")[1]) for p in header.split(", ")}
    assert list(timing) == ["queue", "app", "cpu", "cpuwall", "io"]
    assert 19.5 <= timing["queue"] < 1000
    assert 10 <= timing["cpu"] < 12 and timing["cpuwall"] >= timing["cpu"] - 0.1
    assert timing["io"] >= 15 and timing["app"] >= timing["cpuwall"] + timing["io"] - 0.1
    assert ("Content-Length", "123") in w.wire_headers(resp)


def test_blocking_io_is_yielded_as_a_blocking_wait():
    gen = w.handle("/work", "io_ms=5&io=block", None, "asgi")
    wait = next(gen)
    assert (wait.seconds, wait.blocking) == (0.005, True)
    gen = w.handle("/sleep", "ms=5", None, "asgi")
    assert next(gen).blocking is False


def test_unknown_path_is_404():
    resp = serve("/nope")
    assert resp.status == 404 and resp.body.startswith(b"unknown path /nope (endpoints: /work")


def test_leak_keeps_resident_memory_until_reset_and_refuses_past_its_bound(monkeypatch):
    import json

    def kept(url):
        resp = serve(url)
        assert resp.status == 200, resp.body
        return json.loads(resp.body)["kept_kb"]

    assert kept("/leak?reset=1") == 0
    assert kept("/leak?kb=20480") == 20480 and kept("/leak?kb=1") == 20481
    monkeypatch.setattr(w, "_kept_kb", w.LEAK_BOUND_KB - 10)  # near the bound without keeping 1 GiB
    resp = serve("/leak?kb=11")
    assert resp.status == 507 and resp.body.decode().count("\n") == 1
    assert "bound of 1048576 KiB" in resp.body.decode() and w._kept_kb == w.LEAK_BOUND_KB - 10
    assert kept("/leak?kb=10") == w.LEAK_BOUND_KB
    assert kept("/leak?reset=1") == 0 and w._kept == []
    assert serve("/leak?kb=1048577").status == 400 and serve("/leak?reset=2").status == 400


def test_what_leak_keeps_is_resident_not_a_lazy_zero_page():
    """In a fresh interpreter: in this long-lived one, glibc's mmap threshold has grown with earlier
    tests' freed buffers, so 20 MiB may land on heap pages that are already resident."""
    import subprocess
    import sys

    code = ("import psutil; from arena.subjects.python import workload as w; me = psutil.Process(); "
            "rss0 = me.memory_info().rss; w.leak(20480, False); print(me.memory_info().rss - rss0)")
    grown = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert grown >= 19 * 1024 * 1024, grown


def test_a_requests_loop_wait_is_the_blocked_part_of_the_stretches_it_was_in_flight_for():
    """LoopLag: each late timer's stretch holds its blocked seconds (lateness less the process's CPU);
    a request gets them in proportion to its overlap, and the stretch still running when it ends."""
    import asyncio

    from arena.subjects.wrap.arena_wrap import LoopLag

    lag = LoopLag.__new__(LoopLag)
    lag.stretches = [(1.0, 1.1, 0.1), (2.0, 2.2, 0.05)]  # 100 ms all blocked; 200 ms of which 50 blocked
    lag.due, lag.cpu = 10.0, 0.0
    assert lag.during(0.5, 3.0) == pytest.approx(0.15)
    assert lag.during(1.05, 2.1) == pytest.approx(0.05 + 0.025)  # half of each
    assert lag.during(2.3, 3.0) == 0.0
    # a real loop: a 60 ms time.sleep in a callback holds it; a request in flight across it waits it
    async def main():
        loop = asyncio.get_running_loop()
        real = LoopLag.of(loop)
        assert LoopLag.of(loop) is real  # one a loop
        await asyncio.sleep(0.02)
        began = loop.time()
        loop.call_soon(time.sleep, 0.06)
        await asyncio.sleep(0.03)
        return real.during(began, loop.time())

    assert 0.04 <= asyncio.run(main()) <= 0.1


def test_a_loop_that_waits_for_a_core_another_process_holds_is_not_counted_as_blocked():
    """LoopLag less the loop thread's run queue time: a loop running 20 ms CPU steps on a core a busy
    process shares runs late by about twice its CPU; the other half was the machine's, not a call
    that held the loop (before, 0.17-0.18 s of 0.2 s shared were counted as blocked)."""
    import asyncio

    from arena.subjects.wrap.arena_wrap import LoopLag, _schedstat

    def spin(seconds: float) -> None:
        until = time.process_time() + seconds
        while time.process_time() < until:
            pass

    async def main():
        loop = asyncio.get_running_loop()
        lag = LoopLag.of(loop)
        await asyncio.sleep(0.02)
        began, queued = loop.time(), _schedstat.run_queue_s()
        for _ in range(10):
            loop.call_soon(spin, 0.02)
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        return lag.during(began, loop.time()), _schedstat.run_queue_s() - queued

    burner = subprocess.Popen([sys.executable, "-c", "import os, time\nos.sched_setaffinity(0, {0})\n"
                               "until = time.time() + 5\nwhile time.time() < until: pass"])
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        blocked, queued = asyncio.run(main())
    finally:
        os.sched_setaffinity(0, mine)
        burner.kill()
        burner.wait()
    assert queued >= 0.05, queued  # the loop did wait for the shared core
    assert blocked <= 0.01, (blocked, queued)


def test_a_request_during_which_the_collector_ran_says_how_long_and_one_without_says_nothing():
    """Server-Timing gc: the process's time in the collector while the request was in flight (the
    wrapper's clock, gc.callbacks), only where a collection ran."""
    import gc

    def gc_ms(path: str, query: str) -> float | None:
        st = dict(w.run_sync(path, query, None, "wsgi").headers)["Server-Timing"]
        found = [p for p in st.split(", ") if p.startswith("gc;dur=")]
        return float(found[0].removeprefix("gc;dur=")) if found else None

    built = gc_ms("/json", "min=20000&max=20000")  # 20,000 container objects: gen0 collections run
    assert built is not None and built > 0
    gc.disable()
    try:
        assert gc_ms("/json", "min=20000&max=20000") is None  # no collection, no metric
    finally:
        gc.enable()


def test_the_throttle_clock_reads_either_cgroups_cpu_stat_and_is_zero_without_one(tmp_path):
    from arena.subjects.wrap.arena_wrap import ThrottleClock

    (tmp_path / "v1").write_text("nr_periods 40\nnr_throttled 12\nthrottled_time 1500000000\n")
    (tmp_path / "v2").write_text("usage_usec 9\nuser_usec 5\nsystem_usec 4\nnr_periods 40\nnr_throttled 12\n"
                                 "throttled_usec 250000\n")
    assert ThrottleClock(str(tmp_path / "v1")).seconds() == 1.5
    v2 = ThrottleClock(str(tmp_path / "v2"))
    assert v2.seconds() == 0.25
    (tmp_path / "v2").write_text((tmp_path / "v2").read_text().replace("250000", "400000"))  # re-read in place
    assert v2.seconds() == 0.4
    assert ThrottleClock(None).seconds() == 0.0 and ThrottleClock(str(tmp_path / "missing")).seconds() == 0.0
