"""The fleet simulator against closed forms (M/M/c, M/G/1) and known orderings of the policies."""

import math
from dataclasses import replace

import numpy as np
import pytest

from arena.errors import ArenaError
from tests.doubles import mmc
from arena.model.sim import Dist, Mean, fleet, instances_for, parse_dist, simulate_fleet


def test_central_queue_is_m_m_c():
    """Poisson arrivals, exponential service, one queue before 4 servers at 80%: Erlang C's wait."""
    s = fleet(4, "central", 3.2, Dist("exp", 1.0), 20_000, replications=6)
    exact = mmc(3.2, 1.0, 4).wait_mean  # 0.746 s
    assert s.wait_mean.lo <= exact <= s.wait_mean.hi or abs(s.wait_mean.mean - exact) / exact < 0.05, (s.wait_mean, exact)


def test_one_instance_is_m_g_1():
    """One single-slot instance, lognormal service (mean 1, sigma 1): Pollaczek-Khinchine's wait
    lambda E[S^2] / (2 (1 - rho)), with E[S^2] = e^(sigma^2) for mean 1."""
    lam = 0.6
    exact = lam * math.e / (2 * (1 - lam))  # 2.04 s
    s = fleet(1, "random", lam, Dist("lognormal", 1.0, 1.0), 40_000, replications=6)
    assert abs(s.wait_mean.mean - exact) / exact < 0.08, (s.wait_mean, exact)


def test_policies_order_as_queueing_theory_says():
    """8 single-slot instances at 80%, heavy-tailed service: one central queue waits least, then
    least connections (join the shortest queue), power of two, round robin, random."""
    d = Dist("lognormal", 0.05, 1.5)
    waits = {p: fleet(8, p, 128, d, 20_000, replications=3).wait_mean.mean
             for p in ("central", "leastconn", "random(2)", "roundrobin", "random")}
    assert waits["central"] < waits["leastconn"] < waits["random(2)"] < waits["random"]
    assert waits["roundrobin"] < waits["random"]


def test_every_request_is_served_once_and_round_robin_deals_evenly():
    run = simulate_fleet(4, "roundrobin", 10, Dist("fixed", 0.01), 1000)
    assert run.served.tolist() == [250, 250, 250, 250]
    assert (run.waits >= 0).all() and np.allclose(run.responses - run.waits, 0.01)
    # below capacity with fixed spacing nothing waits: a fixed 10 ms every ~100 ms on 4 instances
    assert run.waits.mean() < 0.001


def test_slots_serve_in_parallel():
    """Two slots on one instance are M/M/2."""
    s = fleet(1, "random", 1.5, Dist("exp", 1.0), 20_000, slots=2, replications=6)
    exact = mmc(1.5, 1.0, 2).wait_mean
    assert abs(s.wait_mean.mean - exact) / exact < 0.08, (s.wait_mean, exact)


def test_fewer_instances_wait_longer_and_the_search_finds_the_least():
    d = Dist("exp", 0.1)
    n = instances_for(0.01, "random", 20, d, 5000, hi=200)
    assert n is not None and 2 < n < 200
    assert fleet(n, "random", 20, d, 5000, replications=3).wait_mean.mean <= 0.01
    assert fleet(n - 1, "random", 20, d, 5000, replications=3).wait_mean.mean > 0.01


def test_distributions_draw_what_they_say():
    rng = np.random.default_rng(3)
    w = Dist("weibull", 0.46, 0.05, 0.01, 30.0).draw(rng, 200_000)
    assert np.median(w) == pytest.approx(0.05, rel=0.03) and w.min() >= 0.01 and w.max() <= 30.0
    ln = Dist("lognormal", 0.05, 1.5).draw(rng, 400_000)
    assert ln.mean() == pytest.approx(0.05, rel=0.05)


@pytest.mark.parametrize("text, dist", [
    ("fixed:20ms", Dist("fixed", 0.02)), ("exp:mean=20ms", Dist("exp", 0.02)),
    ("lognormal:mean=50ms,sigma=1.5", Dist("lognormal", 0.05, 1.5)),
    ("weibull:shape=0.46,median=50ms,min=10ms,max=30s", Dist("weibull", 0.46, 0.05, 0.01, 30.0)),
])
def test_distributions_parse(text, dist):
    assert parse_dist(text) == dist


@pytest.mark.parametrize("text", ["normal:mean=1", "exp:20ms", "weibull:shape=0.46", "lognormal:mean=x,sigma=1",
                                  "exp:mean=0", "fixed:1s,min=2s,max=1s"])
def test_bad_distributions_are_refused(text):
    with pytest.raises(ArenaError, match="^must be a distribution such as"):
        parse_dist(text)


def test_a_mean_over_replications_has_a_student_t_interval():
    e = Mean.of([1.0, 2.0, 3.0])
    assert e.mean == 2.0 and e.hi - e.mean == pytest.approx(4.303 * 1.0 / math.sqrt(3), rel=1e-4)  # qt(0.975, 2)
    assert (e.interval.method, e.interval.coverage) == ("Student's t", 0.95)
    one = Mean.of([5.0])
    assert (one.mean, one.lo, one.hi) == (5.0, 5.0, 5.0)


def test_arena_simulate_prints_every_policy_and_matches_a_queue_time(capsys):
    from arena.cli import main

    assert main(["simulate", "--instances", "4", "--policy", "central,random", "--rate", "40", "--service",
                 "exp:mean=50ms", "--duration", "60s", "--replications", "2", "--match", "central:4"]) == 0
    out = capsys.readouterr().out
    assert "central" in out and "random" in out and "2400 requests x 2 replications" in out
    assert "instances each policy needs for a mean queue time within 1 ms of it:" in out


@pytest.mark.parametrize("argv, message", [
    (["--policy", "fastest"], "argument --policy: must be one of roundrobin, leastconn, random, random(2), central"),
    (["--service", "normal:mean=1s"], "argument --service: must be a distribution such as"),
    (["--match", "central"], "argument --match: must be POLICY:INSTANCES"),
])
def test_arena_simulate_refuses_bad_flags_in_one_line(argv, message, capsys):
    from arena.cli import main

    base = ["simulate", "--instances", "2", "--rate", "1", "--service", "exp:mean=1s"]
    with pytest.raises(SystemExit) as e:
        main(base + argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and err.count("\n") == 1


# ---------------------------------------------------------------------- one instance

from arena.model.queueing import Station, mva  # noqa: E402
from arena.model.instance_sim import Instance, Work, instance  # noqa: E402


@pytest.mark.parametrize("clients", [1, 4, 16])
def test_an_instance_on_product_form_matches_exact_mva(clients):
    """One process without a GIL, threads enough for everyone, one core: exponential CPU on one
    shared core is a processor-sharing queue; the I/O and the time outside are delays: MVA is exact
    there. (With a GIL, a request back from its I/O waits for the GIL again: not product form.)"""
    w = Work(Dist("exp", 0.005), Dist("fixed", 0.015), outside=0.001)
    s = instance(Instance(1, 64, 1, gil=False), w, clients=clients, requests=20_000, replications=4)
    m = mva([Station("cpu", 0.005), Station("io", 0.015, "delay"), Station("out", 0.001, "delay")], clients)[-1]
    assert s.throughput.mean == pytest.approx(m.throughput, rel=0.02)


def test_one_thread_open_is_m_m_1_down_to_its_p99():
    """One thread, exponential CPU, Poisson arrivals at 70%: the response time is exponential with
    rate mu - lambda, so its p99 is ln(100) / (mu - lambda)."""
    s = instance(Instance(1, 1, 1), Work(Dist("exp", 0.01), Dist("fixed", 0.0)), rate=70, requests=40_000,
                 replications=4)
    assert s.response["p99"].mean == pytest.approx(math.log(100) / (100 - 70), rel=0.06)


def test_threads_gil_cores_and_blocking_io_bind_where_they_should():
    w = Work(Dist("fixed", 0.005), Dist("fixed", 0.015))
    # 2 threads of 20 ms: 100 req/s whatever the clients
    assert instance(Instance(1, 2, 2), w, clients=16, requests=5000, replications=2).throughput.mean == \
        pytest.approx(100, rel=0.03)
    # 16 threads, one GIL: 5 ms of CPU each, 200 req/s; two processes on two cores: 400
    assert instance(Instance(1, 16, 2), w, clients=32, requests=5000, replications=2).throughput.mean == \
        pytest.approx(200, rel=0.03)
    assert instance(Instance(2, 16, 2), w, clients=64, requests=5000, replications=2).throughput.mean == \
        pytest.approx(400, rel=0.03)
    # an I/O wait that holds the process: 20 ms per request per process, threads or not
    assert instance(Instance(1, 16, 2, blocking_io=True), w, clients=32, requests=5000,
                    replications=2).throughput.mean == pytest.approx(50, rel=0.03)


def test_arena_simulate_one_server(capsys):
    from arena.cli import main

    assert main(["simulate", "--processes", "1", "--threads", "2", "--cores", "2", "--cpu", "fixed:5ms", "--io",
                 "fixed:15ms", "--concurrency", "8", "--replications", "2"]) == 0
    out = capsys.readouterr().out
    assert "1 process(es) x 2 thread(s) on 2 core(s), a GIL per process" in out
    row = next(line for line in out.splitlines() if line.startswith("│"))
    assert float(row.split("│")[1]) == pytest.approx(100, rel=0.03)  # two threads of 20 ms


def test_arena_simulate_says_what_one_server_needs(capsys):
    from arena.cli import main

    assert main(["simulate", "--processes", "1", "--cpu", "fixed:5ms"]) == 2
    assert capsys.readouterr().err == "arena: error: --processes: one server needs --cpu and one of --concurrency or --rate\n"
    assert main(["simulate", "--processes", "1", "--cpu", "fixed:5ms", "--concurrency", "4", "--inline", "10"]) == 2
    assert "--inline/--least-busy: they need --accept per-process" in capsys.readouterr().err


def test_arena_simulate_pumas_discipline(capsys):
    """--accept per-process --inline 10: Puma's tail, said in the header."""
    from arena.cli import main

    assert main(["simulate", "--processes", "1", "--threads", "2", "--cores", "2", "--cpu", "fixed:5ms", "--io",
                 "fixed:15ms", "--concurrency", "12", "--accept", "per-process", "--inline", "10",
                 "--replications", "2"]) == 0
    out = capsys.readouterr().out
    assert "a thread serves up to 10 requests in a row on a kept-alive connection" in " ".join(out.split())
    row = next(line for line in out.splitlines() if line.startswith("│"))
    assert float(row.split("│")[5].split()[0]) > 800  # p99 ms: about a second


# ---------------------------------------------------------------------- disciplines, phases, calibrated predictions

from arena.model import simulated  # noqa: E402
from arena.model.sim import Empirical  # noqa: E402
from arena.model.instance_sim import simulate_instance  # noqa: E402


def test_pumas_inline_requests_hold_a_connection_for_ten_while_the_rest_wait():
    """1 process x 2 threads, 12 kept-alive clients, 5 ms CPU + 15 ms I/O (about 20 ms each). With
    Puma's discipline a thread serves 10 requests of one connection in a row while the other 10
    connections wait, so a waiting connection waits for 10/2 sessions of 10 x 20 ms: about 1 s,
    while most requests (the inline ones) take 20 ms. FIFO: every request waits its turn, 12 x 20 /
    2 = 120 ms, and no tail of seconds."""
    w = Work(Dist("fixed", 0.005), Dist("fixed", 0.015), outside=0.0003)
    puma = instance(Instance(1, 2, 2, accept="per-process", inline=10), w, clients=12, requests=10_000, replications=2)
    fifo = instance(Instance(1, 2, 2, accept="per-process"), w, clients=12, requests=10_000, replications=2)
    assert puma.response["p50"].mean < 0.025 and 0.8 < puma.response["p99"].mean < 1.3, puma.response
    assert 0.11 < fifo.response["p50"].mean < 0.13 and fifo.response["p99"].mean < 0.15, fifo.response
    assert abs(puma.throughput.mean - fifo.throughput.mean) / fifo.throughput.mean < 0.03
    # as many threads as clients: nobody waits, the discipline changes nothing
    few = instance(Instance(1, 4, 2, accept="per-process", inline=10), w, clients=4, requests=4000, replications=1)
    assert few.response["p99"].mean < 0.03
    # every request is answered, the last ones too (a thread does not wait for a request never sent)
    run = simulate_instance(Instance(1, 2, 2, accept="per-process", inline=10), w, clients=12, requests=3000)
    assert run.responses.min() > 0.019 and run.waits.min() >= 0


def test_least_busy_accept_spreads_connections_where_a_race_may_not():
    """2 single-thread processes, 2 clients, 10 ms fixed work: accepted by the least busy process,
    one connection each (twice the throughput of one process); accepted at random, some seeds put
    both on one process."""
    w = Work(Dist("fixed", 0.001), Dist("fixed", 0.009))
    spread = [simulate_instance(Instance(2, 1, 2, accept="per-process", least_busy=True), w, clients=2, requests=400,
                                seed=s) for s in range(1, 9)]
    assert all(r.served.tolist() == [200, 200] for r in spread)
    raced = [simulate_instance(Instance(2, 1, 2, accept="per-process"), w, clients=2, requests=400, seed=s)
             for s in range(1, 9)]
    assert any(sorted(r.served.tolist()) == [0, 400] for r in raced)


def test_constant_arrivals_below_capacity_never_queue():
    """Arrivals every 10 ms (arena-load's default spacing), 8 ms of fixed work: D/D/1 waits zero,
    where Poisson arrivals at the same rate queue."""
    w = Work(Dist("fixed", 0.008), Dist("fixed", 0.0))
    even = simulate_instance(Instance(1, 1, 1), w, rate=100, arrival="constant", requests=2000)
    poisson = simulate_instance(Instance(1, 1, 1), w, rate=100, requests=2000)
    assert even.waits.max() < 1e-9 and poisson.waits.mean() > 0.005


def test_the_pool_binds_where_it_is_smaller_than_the_threads():
    """4 threads, 10 ms holding a connection and little else: one connection serves about 100
    requests/s, four about 400."""
    w = Work(Dist("fixed", 0.0001), Dist("fixed", 0.0), db=Dist("fixed", 0.01))
    one = instance(Instance(1, 4, 2, pool=1), w, clients=8, requests=4000, replications=1).throughput.mean
    four = instance(Instance(1, 4, 2, pool=4), w, clients=8, requests=4000, replications=1).throughput.mean
    assert 95 < one < 101 and 370 < four < 401, (one, four)


def test_the_databases_cpu_on_the_servers_core_competes_with_the_app():
    """1 core: 5 ms of app CPU and 5 ms of the database's CPU per request: at most 100 requests/s
    when they share the core; 200 with a core of its own."""
    w = Work(Dist("fixed", 0.005), Dist("fixed", 0.0), db=Dist("fixed", 0.0), db_cpu=Dist("fixed", 0.005))
    shared = instance(Instance(2, 8, 1, pool=8), w, clients=32, requests=4000, replications=1)
    own = instance(Instance(2, 8, 1, pool=8, db_cores=1), w, clients=32, requests=4000, replications=1)
    assert 95 < shared.throughput.mean < 101 and 190 < own.throughput.mean < 201


def test_an_empirical_distribution_is_its_quantile_function():
    uniform = Empirical(((0.0, 0.0), (1.0, 1.0)))
    x = uniform.draw(np.random.default_rng(3), 100_000)
    assert abs(x.mean() - 0.5) < 0.01 and uniform.mean == pytest.approx(0.5)
    assert abs(np.quantile(x, 0.9) - 0.9) < 0.01
    up = uniform.with_mean(0.8)  # more than it has: the rest is a constant added
    assert up.mean == pytest.approx(0.8) and up.draw(np.random.default_rng(1), 1000).min() >= 0.3
    down = uniform.with_mean(0.25)  # less: scaled down
    assert down.mean == pytest.approx(0.25) and down.draw(np.random.default_rng(1), 1000).max() <= 0.5


def _given(server: str):
    from arena.app.predict import given_calibration

    return given_calibration(server, 2.0, cpu_ms=5.0, io_ms=15.0, outside_ms=0.3)


def test_the_calibrated_instance_takes_the_servers_discipline():
    puma = simulated.instance(_given("puma"), 1, 2)
    assert (puma.accept, puma.inline, puma.least_busy) == ("per-process", 10, True)
    assert simulated.instance(_given("puma"), 1, 2, keep_alive=False).accept == "shared"
    gthread = simulated.instance(_given("gunicorn-gthread"), 2, 4)
    assert (gthread.accept, gthread.inline, gthread.least_busy) == ("per-process", 0, False)
    assert simulated.instance(_given("unicorn"), 2, None).accept == "shared"
    assert "10 requests in a row" in simulated.discipline(puma)


def test_a_simulated_prediction_beside_the_mean_value_models():
    """Puma 1 x 2 at 12 clients: the same throughput as the mean-value model and, with the model's
    inline requests too, about the same p99, a second (a FIFO queue says about 0.2 s); an open load
    beyond capacity overloads."""
    from arena.model.verify import predict as mva

    cal = _given("puma")
    sim = simulated.predict(cal, 1, 2, "closed", 12, requests=8000, replications=2)
    model = mva(cal, 1, 2, "closed", 12)
    assert abs(sim.prediction.throughput - model.throughput) / model.throughput < 0.05
    assert sim.prediction.p99_ms == pytest.approx(model.p99_ms, rel=0.25) and model.p99_ms > 800
    assert sim.p99_lo_ms <= sim.prediction.p99_ms <= sim.p99_hi_ms
    assert "threads" in sim.prediction.binding
    assert simulated.predict(cal, 1, 2, "open", 500).prediction.overloaded


def test_a_request_back_from_its_wait_takes_the_gil_again_before_it_answers():
    """1 process x 2 threads on 2 cores, 2 clients sending one request each, 10 ms CPU + 5 ms I/O.
    A: CPU 0-10 ms, I/O 10-15; B waits for the GIL, CPU 10-20, I/O 20-25. A's I/O ends while B holds
    the GIL, so A answers when B's burst ends, at 20 ms (not 15); B at 25. Without a GIL: 10 + 5 each."""
    w = Work(Dist("fixed", 0.010), Dist("fixed", 0.005))
    run = simulate_instance(Instance(1, 2, 2), w, clients=2, requests=2)
    assert sorted(run.responses.tolist()) == pytest.approx([0.020, 0.025])
    free = simulate_instance(Instance(1, 2, 2, gil=False), w, clients=2, requests=2)
    assert free.responses.tolist() == pytest.approx([0.015, 0.015])
    # a request with no wait keeps the GIL to its end: nothing to take back
    cpu_only = simulate_instance(Instance(1, 2, 2), Work(Dist("fixed", 0.010), Dist("fixed", 0.0)), clients=2,
                                 requests=2)
    assert sorted(cpu_only.responses.tolist()) == pytest.approx([0.010, 0.020])


def test_cores_are_shared_by_the_bursts_that_run_at_once():
    """2 processes on 1 core, 2 clients, 10 ms of CPU each at the same moment: shared, both end at
    20 ms (a FIFO of whole bursts would end one at 10 and the other at 20); on 1.5 cores each runs
    at 0.75 of a core and both end at 13.3 ms; on 2 cores, at 10 ms."""
    w = Work(Dist("fixed", 0.010), Dist("fixed", 0.0))
    for cores, each in ((1, 0.020), (1.5, 0.010 / 0.75), (2, 0.010)):
        spread = Instance(2, 1, cores, accept="per-process", least_busy=True)
        run = simulate_instance(spread, w, clients=2, requests=2)
        assert run.served.tolist() == [1, 1] and run.responses.tolist() == pytest.approx([each, each]), cores


def _held(run) -> tuple[float, float]:
    """(requests/s, throttled ms a second) of a run."""
    span = float((run.arrivals + run.responses).max() - run.arrivals.min())
    return len(run.responses) / span, 1000 * run.throttled_s / span


def test_a_cpu_quota_runs_its_share_of_each_period_then_holds_every_thread():
    """CFS bandwidth control: one busy thread (8 ms bursts, no wait) under a 0.5-core quota on one
    core runs 50 ms of each 100 ms period and is held the other 50: 62.5 requests/s, 500 ms a second
    throttled. Two busy processes on two cores under a 1-core quota spend the period's 100 ms in 50 ms
    of both cores, then both wait: 125 requests/s, and 2 CPUs x 500 ms = 1,000 ms a second throttled
    (cpu.stat sums its runqueues). A quota above what the threads can use never holds them."""
    busy = Work(Dist("fixed", 0.008), Dist("fixed", 0.0))
    one = simulate_instance(Instance(1, 1, 1.0, quota=0.5), busy, clients=1, requests=2000)
    assert _held(one) == pytest.approx((62.5, 500.0), rel=0.01)
    two = simulate_instance(Instance(2, 1, 2.0, quota=1.0), busy, clients=2, requests=4000)
    assert _held(two) == pytest.approx((125.0, 1000.0), rel=0.01)
    a_50ms_period = simulate_instance(Instance(2, 1, 2.0, quota=1.0, period=0.05), busy, clients=2, requests=4000)
    assert _held(a_50ms_period) == pytest.approx((125.0, 1000.0), rel=0.01)
    free = simulate_instance(Instance(2, 1, 2.0, quota=2.5), busy, clients=2, requests=4000)
    unlimited = simulate_instance(Instance(2, 1, 2.0), busy, clients=2, requests=4000)
    assert free.throttled_s == 0 and np.array_equal(free.responses, unlimited.responses)


def test_a_quota_is_not_a_slower_core():
    """One thread of 30 ms bursts under a 0.5-core quota: a burst inside the period's 50 ms runs at
    full speed (30 ms); one that meets the end of the quota waits out the period's other 50 ms
    (80 ms). On half a core every burst takes 60 ms. The same throughput, another tail."""
    w = Work(Dist("fixed", 0.030), Dist("fixed", 0.0))
    quota = simulate_instance(Instance(1, 1, 1.0, quota=0.5), w, clients=1, requests=400)
    half = simulate_instance(Instance(1, 1, 0.5), w, clients=1, requests=400)
    assert sorted(set(np.round(quota.responses, 9).tolist())) == [0.030, 0.080]
    assert sorted(set(np.round(half.responses, 9).tolist())) == [0.060]
    assert _held(quota)[0] == pytest.approx(_held(half)[0], rel=0.01) and half.throttled_s == 0


def test_predict_under_a_quota_simulates_its_periods():
    """``arena predict --cpu-limit``: the simulator runs with the quota's periods (without --sim), and
    says how long the quota held the server back; the mean-value model takes the quota as cores."""
    from arena.app.predict import Given, Load, prediction

    given = Given(8.0, 4.0, cpu_cv2=0.0)
    held = prediction("gunicorn-sync", 2, None, [Load("closed", 8)], given=given, cores=2.0, quota=1.0)
    free = prediction("gunicorn-sync", 2, None, [Load("closed", 8)], given=given, cores=2.0)
    row = held.rows[0]
    assert free.rows[0].simulated is None and row.simulated.instance.quota == 1.0
    assert held.config.cores == 1.0 and held.calibration.cores == 2.0
    assert row.simulated.throttled_ms_per_s == pytest.approx(500, rel=0.1)  # both CPUs, half of each period
    assert row.simulated.prediction.throughput == pytest.approx(row.prediction.throughput, rel=0.01)  # 1 core's worth


def test_a_discipline_the_catalog_lacks_is_learned_from_the_first_level_with_queueing():
    """uWSGI's catalog entry does not say how its processes take connections. Measurements made by
    the simulator itself with Puma's discipline (least busy, 10 inline) at 1, 8 and 32 clients: the
    learning picks that discipline from the 8-client level, and the rest of the levels are then
    predicted with it; where only one level was measured there is nothing to learn from."""
    from types import SimpleNamespace

    from arena.model.calibrate import Discipline

    cal = replace(_given("uwsgi"), keep_alive=True)
    assert simulated.discipline_of(cal) == simulated.ASSUMED
    truth = replace(cal, discipline=Discipline("least-busy", 10))

    def cell(p, t, level):
        p99 = simulated.predict(truth, p, t, "closed", level, keep_alive=True, requests=4000, replications=2)
        return SimpleNamespace(server="uwsgi", workload=cal.workload, model="closed", level=level, front=None,
                               processes=p, threads=t, pool=None, runs=[SimpleNamespace(kept_alive=True)],
                               p99_us=SimpleNamespace(median=p99.prediction.p99_ms * 1000))

    cells = [cell(p, t, level) for p, t in ((1, 2), (2, 2), (2, 4)) for level in (1, 8, 32)]
    learned = simulated.learn(cal, cells)
    assert (learned.discipline.accept, learned.discipline.inline, learned.discipline.learned_at) == ("least-busy", 10, 8)
    assert "learned at c=8 from 3 configurations" in simulated.discipline_text(learned)
    assert simulated.instance(learned, 2, 2).least_busy
    assert simulated.learn(cal, [c for c in cells if c.level == 8]) is cal  # one level: nothing to learn from
    # a server whose catalog entry gives its discipline is not asked to learn by the commands
    from arena.app.predict import for_simulation

    assert for_simulation(_given("puma"), SimpleNamespace(cells=cells)).discipline is None


ENGINE_CASES = [  # (instance, work, load): every step of the event loop taken somewhere
    (Instance(2, 4, 1.0), Work(Dist("exp", 0.005), Dist("exp", 0.01), 0.001), dict(clients=16)),
    (Instance(2, 4, 1.0, accept="per-process", inline=10), Work(Dist("exp", 0.005), Dist("exp", 0.01), 0.001),
     dict(clients=16)),
    (Instance(3, 2, 1.5, accept="per-process", least_busy=True), Work(Dist("lognormal", 0.004, 1.0), Dist("fixed", 0.0)),
     dict(clients=20)),
    (Instance(1, None, 1.0), Work(Dist("exp", 0.002), Dist("exp", 0.02)), dict(rate=200.0, arrival="poisson")),
    (Instance(2, 5, 2.0, pool=2, db_cores=1.0),
     Work(Dist("exp", 0.002), Dist("exp", 0.003), 0.0, Dist("exp", 0.004), Dist("exp", 0.001)),
     dict(rate=150.0, arrival="constant")),
    (Instance(2, 5, 2.0, pool=3), Work(Dist("exp", 0.002), Dist("exp", 0.003), 0.0, Dist("exp", 0.004), Dist("exp", 0.001)),
     dict(clients=12)),
    (Instance(4, 1, 2.0, gil=False, blocking_io=True), Work(Dist("exp", 0.003), Dist("exp", 0.005)), dict(clients=8)),
    # under a CPU quota: bursts end, the quota runs out and periods end, in every order
    (Instance(4, 1, 2.0, quota=0.7), Work(Dist("exp", 0.008), Dist("exp", 0.004)), dict(clients=8)),
    (Instance(2, 4, 2.0, quota=0.4, period=0.02, pool=2, db_cores=1.0),
     Work(Dist("exp", 0.002), Dist("exp", 0.003), 0.0, Dist("exp", 0.004), Dist("exp", 0.001)),
     dict(rate=150.0, arrival="poisson")),
]


@pytest.mark.parametrize("inst, work, load", ENGINE_CASES)
def test_the_compiled_engine_gives_the_python_engines_numbers_to_the_bit(inst, work, load):
    """arena-sim (crates/arena-sim) runs _InstanceSim's steps in Rust: the same replication, the same
    floats, where it is built (make build); the Python engine is the fallback."""
    from arena import paths
    from arena.model.instance_sim import _InstanceSim

    binary = paths.built("arena-sim", "ARENA_SIM_BIN")
    if binary is None:
        pytest.fail("arena-sim is not built (make build)")
    args = (inst, work, load.get("clients"), load.get("rate"), load.get("arrival", "poisson"), 5000, 3)
    a, b = _InstanceSim(*args).run(), _InstanceSim(*args).start_compiled(binary)()
    for x, y in ((a.arrivals, b.arrivals), (a.waits, b.waits), (a.responses, b.responses), (a.served, b.served)):
        assert np.array_equal(x, y)
    assert (a.cpu_s, a.in_service_s, a.throttled_s) == (b.cpu_s, b.in_service_s, b.throttled_s) and a.cpu_s > 0
    assert (a.throttled_s > 0) == (inst.quota is not None)
