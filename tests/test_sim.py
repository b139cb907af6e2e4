"""The fleet simulator against closed forms (M/M/c, M/G/1) and known orderings of the policies."""

import math

import numpy as np
import pytest

from arena.errors import ArenaError
from arena.model.queueing import mmc
from arena.model.sim import Dist, Estimate, fleet, instances_for, parse_dist, simulate_fleet


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


def test_an_estimate_has_a_student_t_interval():
    e = Estimate.of([1.0, 2.0, 3.0])
    assert e.mean == 2.0 and e.hi - e.mean == pytest.approx(4.303 * 1.0 / math.sqrt(3), rel=1e-4)  # qt(0.975, 2)
    assert Estimate.of([5.0]) == Estimate(5.0, 5.0, 5.0)


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
from arena.model.sim import Instance, Work, instance  # noqa: E402


@pytest.mark.parametrize("clients", [1, 4, 16])
def test_an_instance_on_product_form_matches_exact_mva(clients):
    """One process, threads enough for everyone, one core: exponential CPU behind one GIL on one
    core is a FIFO queue; the I/O and the time outside are delays: MVA is exact there."""
    w = Work(Dist("exp", 0.005), Dist("fixed", 0.015), outside=0.001)
    s = instance(Instance(1, 64, 1), w, clients=clients, requests=20_000, replications=4)
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
