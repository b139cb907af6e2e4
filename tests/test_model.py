"""arena.model against exact solutions, textbook values and published data."""

import math

import numpy as np
import pytest

from arena.model import queueing as q
from arena.model import usl
from arena.model.server import Config, Demand, capacity, predict_closed, predict_open
from tests.doubles import mmc

# ---------------------------------------------------------------------- exact MVA


def ctmc_throughput(demands: list[tuple[str, float, tuple[float, ...]]], customers: int, think: float) -> float:
    """Throughput of a closed cyclic network (think -> station 1 -> station 2 -> think), by solving
    its continuous-time Markov chain directly: states (n1, n2), rates from each station's alpha(j)."""
    states = [(a, b) for a in range(customers + 1) for b in range(customers + 1 - a)]
    index = {s: i for i, s in enumerate(states)}
    k = len(states)
    gen = np.zeros((k, k))

    def rate(station, j):
        _, d, alpha = demands[station]
        return alpha[min(j, len(alpha)) - 1] / d if j > 0 else 0.0

    for (a, b), i in index.items():
        thinking = customers - a - b
        moves = []
        if thinking > 0:
            moves.append(((a + 1, b), thinking / think if think > 0 else 0.0))
        if a > 0:
            moves.append(((a - 1, b + 1), rate(0, a)))
        if b > 0:
            moves.append(((a, b - 1), rate(1, b)))
        for target, r in moves:
            if r > 0:
                gen[i, index[target]] += r
                gen[i, i] -= r
    a_mat = np.vstack([gen.T, np.ones(k)])
    rhs = np.zeros(k + 1)
    rhs[-1] = 1
    pi, *_ = np.linalg.lstsq(a_mat, rhs, rcond=None)
    return sum(pi[index[(a, b)]] * rate(1, b) for a, b in states)


@pytest.mark.parametrize("customers", [1, 2, 5, 12])
def test_mva_with_load_dependent_stations_matches_the_markov_chain(customers):
    cpu = ("cpu", 0.004, (1.0, 2.0))  # two cores
    gil = ("gil", 0.006, (1.0, 1.6, 1.9, 2.0))  # some other load-dependent rate
    stations = [q.Station(n, d, "ld", a) for n, d, a in (cpu, gil)]
    got = q.mva(stations, customers, think=0.02)[-1].throughput
    assert got == pytest.approx(ctmc_throughput([cpu, gil], customers, 0.02), rel=1e-9)


def test_mva_single_station_repairman_closed_form():
    # M/M/1//N (machine repairman) [Kleinrock 1975 §3.8]: p0 = 1 / sum_k N!/(N-k)! (S/Z)^k, X = (1-p0)/S
    n, s, z = 7, 0.01, 0.05
    p0 = 1 / sum(math.factorial(n) / math.factorial(n - k) * (s / z) ** k for k in range(n + 1))
    point = q.mva([q.Station("disk", s)], n, think=z)[-1]
    assert point.throughput == pytest.approx((1 - p0) / s, rel=1e-12)
    # and the same station as load dependent with alpha = 1 gives the same numbers and p0
    ld = q.mva([q.Station("disk", s, "ld", (1.0,))], n, think=z)[-1]
    assert ld.throughput == pytest.approx(point.throughput, rel=1e-12)
    assert ld.marginals["disk"][0] == pytest.approx(p0, rel=1e-9)


def test_mva_without_think_time_is_the_bottleneck_law():
    pts = q.mva([q.Station("a", 0.002), q.Station("b", 0.005), q.Station("d", 0.1, "delay")], 200)
    assert pts[0].throughput == pytest.approx(1 / 0.107)  # one customer: 1 / sum of demands
    assert pts[-1].throughput == pytest.approx(1 / 0.005, rel=1e-6)  # many: 1 / the largest demand
    assert pts[-1].response == pytest.approx(200 / pts[-1].throughput)  # Little's law, Z = 0


def test_birth_death_is_normalized_and_balanced():
    pi = q.birth_death([3.0, 3.0, 3.0], [1.0, 2.0, 3.0])
    assert sum(pi) == pytest.approx(1)
    for j in range(3):  # detailed balance
        assert pi[j] * 3.0 == pytest.approx(pi[j + 1] * [1.0, 2.0, 3.0][j])


# ---------------------------------------------------------------------- open queues


def test_erlang_c_textbook_values():
    assert q.erlang_c(3, 2.0) == pytest.approx(4 / 9)  # a = 2 Erlangs on 3 servers
    assert q.erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert q.erlang_c(2, 1.0) == pytest.approx(1 / 3)  # M/M/2 at rho 0.5: 2 rho^2 / (1 + rho)
    assert q.erlang_b(2, 1.0) == pytest.approx(0.2)  # (1/2) / (1 + 1 + 1/2)
    assert q.erlang_c(10, 12.0) == 1.0  # overloaded


def test_mm1_and_mmc_waits():
    r = mmc(80.0, 0.01, 1)  # M/M/1, rho 0.8: Wq = rho / (mu - lambda) = 0.8 / 20
    assert not r.overloaded and r.wait_mean == pytest.approx(0.04) and r.response_mean == pytest.approx(0.05)
    # P(Wq > t) = rho e^{-(mu - lambda) t}: its 99th percentile is ln(0.8 / 0.01) / 20
    assert r.wait_quantile(0.99) == pytest.approx(math.log(80) / 20)
    assert r.wait_quantile(0.1) == 0.0  # 20% do not wait at all
    two = mmc(1.0, 1.0, 2)  # M/M/2, lambda 1, mu 1: Wq = C / (c mu - lambda) = (1/3) / 1
    assert two.wait_mean == pytest.approx(1 / 3)
    assert mmc(2.5, 1.0, 2).overloaded and math.isinf(mmc(2.5, 1.0, 2).wait_quantile(0.5))


def test_allen_cunneen():
    # deterministic service (cs^2 = 0), Poisson arrivals: half the M/M/c wait; M/D/1 is exact here
    md1 = q.allen_cunneen(80.0, 0.01, 1, 1.0, 0.0)
    assert md1.wait_mean == pytest.approx(0.02)  # Pollaczek-Khinchine: rho S / (2 (1 - rho)) = 0.8*0.01/0.4
    assert q.allen_cunneen(1.0, 1.0, 2, 1.0, 1.0) == mmc(1.0, 1.0, 2)


def test_gamma_and_mixture_quantiles():
    assert q.gamma_p(1.0, 2.0) == pytest.approx(1 - math.exp(-2))
    assert q.gamma_p(3.0, 2.0) == pytest.approx(1 - math.exp(-2) * (1 + 2 + 2))  # Erlang-3
    assert q.gamma_p(3.0, 20.0) == pytest.approx(1 - math.exp(-20) * (1 + 20 + 200), rel=1e-12)
    exp = q.ShiftedGamma(0.001, 0.01, 0.0001)  # shift + exponential of mean 10 ms
    assert q.mixture_quantile([(1.0, exp)], 0.99) == pytest.approx(0.001 + 0.01 * math.log(100), rel=1e-6)


def _quantiles(ppf) -> tuple[float, ...]:
    """A distribution as Demand.service holds it: its quantiles at queueing.SERVICE_AT."""
    return tuple(float(ppf(p)) for p in q.SERVICE_AT)


def test_a_wait_convolved_with_a_service_distribution_has_the_sums_quantiles():
    """queueing.convolved_quantiles against closed forms: no wait leaves the service's own
    quantiles; a fixed service shifts a gamma wait; an exponential service and an exponential wait
    of other rates sum to a hypoexponential, whose CDF is known."""
    from scipy.optimize import brentq
    from scipy.stats import expon, gamma

    exp30 = _quantiles(lambda p: expon.ppf(p, scale=0.030))
    alone = q.convolved_quantiles([(1.0, q.ShiftedGamma(0.0, 0.0, 0.0))], exp30, (0.5, 0.99))
    assert alone == pytest.approx([0.030 * math.log(2), 0.030 * math.log(100)], rel=0.003)
    wait = q.ShiftedGamma(0.002, 0.020, 0.020 ** 2 / 3)  # 2 ms + a gamma of shape 3
    fixed = q.convolved_quantiles([(1.0, wait)], (0.008,) * len(q.SERVICE_AT), (0.99,))[0]
    assert fixed == pytest.approx(0.010 + gamma.ppf(0.99, 3, scale=0.020 / 3), rel=1e-3)
    a, b = 1 / 0.030, 1 / 0.010  # rates of the service and of the wait
    hypo = brentq(lambda t: 1 - (b * math.exp(-a * t) - a * math.exp(-b * t)) / (b - a) - 0.99, 0, 10)
    mixed = q.convolved_quantiles([(0.5, q.ShiftedGamma(0.0, 0.010, 0.010 ** 2))] * 2, exp30, (0.99,))[0]
    assert mixed == pytest.approx(hypo, rel=0.003)
    with pytest.raises(ValueError, match="quantiles at SERVICE_AT"):
        q.convolved_quantiles([(1.0, wait)], (0.008,) * 10, (0.99,))


@pytest.mark.parametrize("shape", ("fixed", "exponential", "lognormal"))
def test_one_client_sees_the_service_times_own_p99(shape):
    """A request alone waits for nothing: the model's p99 at one client (closed) and at a trickle
    (open) is its service time's own p99 (8 ms CPU + 30 ms of I/O of each shape), where the
    means alone said 38 ms whatever the shape."""
    from scipy.stats import expon, lognorm

    sigma = 1.0
    io = {"fixed": lambda p: 0.030, "exponential": lambda p: expon.ppf(p, scale=0.030),
          "lognormal": lambda p: lognorm.ppf(p, sigma, scale=0.030 * math.exp(-sigma ** 2 / 2))}[shape]
    service = _quantiles(lambda p: 0.008 + io(p))
    truth = 1000 * (0.008 + io(0.99))
    w = Demand(cpu_ms=8, io_ms=30, service=service)
    assert predict_closed(w, Config(1, 1, 1), 1).p99_ms == pytest.approx(truth, rel=0.003)
    assert predict_open(w, Config(2, 1, 1), 0.01).p99_ms == pytest.approx(truth, rel=0.003)
    assert predict_closed(Demand(cpu_ms=8, io_ms=30), Config(1, 1, 1), 1).p99_ms == pytest.approx(38.0)
    busy = predict_closed(w, Config(1, 1, 1), 6)  # one process, six clients: five ahead at worst
    assert busy.p99_ms > truth and busy.p50_ms > 1000 * (0.008 + io(0.5))


def test_departures_are_as_variable_as_the_service_for_one_server_and_poisson_for_many():
    """QNA's departures with every server busy: c_d^2 = 1 + (c_s^2 - 1) / sqrt(m)."""
    from scipy.stats import expon

    from arena.model.server import departures_cv2

    fixed = (0.030,) * len(q.SERVICE_AT)
    assert departures_cv2(fixed, 1) == pytest.approx(0.0, abs=1e-12)
    assert departures_cv2(fixed, 4) == pytest.approx(0.5)
    assert departures_cv2(_quantiles(lambda p: expon.ppf(p, scale=0.030)), 1) == pytest.approx(1.0, abs=0.01)
    assert departures_cv2((), 1) == 1.0
    # one process, two clients, a fixed 30 ms: the other's residual is all the wait there is
    alone, two = (predict_closed(Demand(cpu_ms=30, io_ms=0, cpu_cv2=0.0, service=fixed), Config(1, 1, 1), n)
                  for n in (1, 2))
    assert alone.p99_ms == pytest.approx(30.0, rel=1e-3) and two.p99_ms == pytest.approx(60.0, rel=0.01)


# ---------------------------------------------------------------------- USL


@pytest.mark.parametrize("seed", range(5))
def test_the_root_is_scipys_brentq_root_in_as_few_evaluations(seed):
    """solve.root (Brent's method, written to keep scipy.optimize's import off the report) against
    scipy.optimize.brentq: the same root to the tolerance, on smooth, steep, flat and stepped
    monotone functions, in at most two evaluations more."""
    from scipy.optimize import brentq

    from arena.model.solve import root

    rng = np.random.default_rng(seed)
    for _ in range(200):
        shift, scale, power = rng.uniform(-5, 5), rng.uniform(0.01, 100), rng.choice([1, 3, 5])
        kind = rng.integers(4)
        f = [lambda x: math.tanh((x - shift) * scale),
             lambda x: (x - shift) ** power,
             lambda x: math.expm1(x - shift) * scale,
             lambda x: math.floor((x - shift) * 4) + 0.5][kind]
        calls = [0, 0]

        def counted(i):
            def g(x):
                calls[i] += 1
                return f(x)
            return g
        want = brentq(counted(0), -10.0, 10.0, xtol=1e-9, rtol=1e-9)
        got = root(counted(1), -10.0, 10.0, xtol=1e-9, rtol=1e-9)
        assert abs(got - want) <= 2e-9 + 2e-9 * abs(want), (kind, shift, scale, power)
        assert calls[1] <= calls[0] + 2, (kind, calls)
    with pytest.raises(ValueError, match="same sign"):
        root(lambda x: x * x + 1, -1.0, 1.0, xtol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_the_nonnegative_fit_is_scipys_nnls(seed):
    """solve.nonnegative_lstsq against scipy.optimize.nnls (Lawson and Hanson) on fits of one to
    three terms, many with terms that want to go below 0: the same residual, the same terms."""
    from scipy.optimize import nnls

    from arena.model.solve import nonnegative_lstsq

    rng = np.random.default_rng(seed)
    for _ in range(200):
        n, rows = rng.integers(1, 4), rng.integers(3, 9)
        a = rng.uniform(0, 10, (rows, n))
        y = a @ rng.normal(0, 5, n) + rng.normal(0, 1, rows)
        want, want_norm = nnls(a, y)
        got = nonnegative_lstsq(a, y)
        assert (got >= 0).all()
        assert np.linalg.norm(a @ got - y) == pytest.approx(want_norm, rel=1e-9, abs=1e-9)
        assert np.allclose(got, want, rtol=1e-7, atol=1e-7)


def test_usl_fit_reproduces_the_published_specsdm91_coefficients():
    # SPEC SDM91 on a Sun SPARCcenter 2000 [Gunther, Guerrilla Capacity Planning, 2007, ch. 5], the
    # R package usl's data set `specsdm91`; its nlxb fit (tests/usl-nlxb.Rout.save) gives
    # sigma 0.0277285 (se 0.0091217), kappa 0.0001044 (se 0.0000199), lambda 89.9952330 (se 14.2134894).
    fit = usl.fit([1, 18, 36, 72, 108, 144, 216], [64.9, 995.9, 1652.4, 1853.2, 1828.9, 1775.0, 1702.2])
    assert fit.sigma == pytest.approx(0.0277285, rel=1e-4)
    assert fit.kappa == pytest.approx(0.0001044, rel=1e-3)
    assert fit.lam == pytest.approx(89.9952330, rel=1e-5)
    assert fit.stderr[0] == pytest.approx(0.0091217, rel=1e-3) and fit.stderr[2] == pytest.approx(14.2134894, rel=1e-3)
    assert fit.peak_n == pytest.approx(math.sqrt((1 - fit.sigma) / fit.kappa))
    lo, hi = fit.ci95[0]
    assert lo < fit.sigma < hi and lo >= 0


def test_usl_fit_recovers_known_coefficients():
    # the R package's tests/coef.R data: generated with sigma = kappa = 0.02, lambda = 1
    fit = usl.fit([1, 2, 4, 6, 8, 10], [1, 1.8868, 3.0769, 3.5294, 3.5398, 3.3557])
    assert (round(fit.sigma, 3), round(fit.kappa, 3), round(fit.lam, 3)) == (0.02, 0.02, 1.0)
    with pytest.raises(ValueError):
        usl.fit([1, 2, 2], [1, 2, 2])


def test_usl_keeps_coefficients_non_negative():
    n = [1, 2, 4, 8, 16]
    fit = usl.fit(n, [10 * x for x in n])  # perfectly linear: no contention, no crosstalk
    assert fit.sigma == pytest.approx(0, abs=1e-9) and fit.kappa == pytest.approx(0, abs=1e-9)
    assert not fit.peak_shown  # kappa's interval reaches 0: no peak is claimed


# ---------------------------------------------------------------------- the server model


def test_server_model_limits():
    w = Demand(cpu_ms=5, io_ms=20, outside_ms=0)
    one = predict_closed(w, Config(1, 1, 1), 1)
    assert one.throughput == pytest.approx(1000 / 25) and one.mean_ms == pytest.approx(25)
    # threads bind: 4 slots, plenty of clients: the server holds 4 at a time, which is the machine
    # repairman with N = 4, S = 5 ms, Z = 20 ms (the 4 in service share the core while not in I/O)
    n, s, z = 4, 0.005, 0.020
    p0 = 1 / sum(math.factorial(n) / math.factorial(n - k) * (s / z) ** k for k in range(n + 1))
    four = predict_closed(w, Config(1, 4, 1), 64)
    assert four.throughput == pytest.approx((1 - p0) / s, rel=1e-6) and four.binding.startswith("threads")
    # CPU binds: 16 threads could do 640/s, one core does 200/s
    many = predict_closed(w, Config(1, 16, 1), 64)
    assert many.throughput == pytest.approx(200, rel=0.01) and many.binding.startswith("CPU")
    # the GIL binds: one process on 4 cores does no better than on one
    assert predict_closed(w, Config(1, 16, 4), 64).throughput == pytest.approx(200, rel=0.01)
    assert predict_closed(w, Config(4, 16, 4), 64).throughput > 600
    assert predict_closed(w, Config(1, 16, 4, gil=False), 64).throughput > 600
    assert capacity(w, Config(1, 4, 1)) == pytest.approx((1 - p0) / s, rel=1e-6)


def test_open_model_overload_and_light_load():
    w = Demand(cpu_ms=5, io_ms=0)
    light = predict_open(w, Config(1, 1, 1), 1.0)
    assert light.mean_ms == pytest.approx(1000 / (200 - 1), rel=1e-3)  # M/M/1: 1 / (mu - lambda)
    assert light.p99_ms == pytest.approx(5.0, rel=1e-3)  # alone, a request takes its own 5 ms
    busy = predict_open(w, Config(1, 1, 1), 180.0)
    assert busy.mean_ms == pytest.approx(1000 / (200 - 180), rel=1e-3)
    assert busy.p99_ms > 3 * busy.p50_ms > 3 * 5.0
    over = predict_open(w, Config(1, 1, 1), 250.0)
    assert over.overloaded and math.isinf(over.mean_ms) and "overloaded" in over.binding


def test_a_published_puma_benchmark():
    """Puma 7.2.0, 2 workers x 5 threads, an endpoint that sleeps 5 ms, `hey` at 10..60 connections,
    on an AMD Ryzen 7 9700X (8 cores): the "Before" table of puma_bench_results.txt attached to Ruby
    bug #21685's journal, https://redmine.ruby-lang.org/attachments/journals/116197 (2026).

    What the model needed to assume (the source gives none of it): 0.05 ms of CPU per request (a
    trivial Rack app) and 0.05 ms outside the server (loopback); the sleep releases the GVL; hey's
    keep-alive connections stay with the worker that accepted them (per-process routing)."""
    published = {60: (1954, 30.6), 40: (1954, 20.4), 30: (1957, 15.3), 20: (1952, 10.2), 15: (1871, 6.7),
                 10: (1937, 5.1)}  # connections: (requests/s, p50 ms)
    w = Demand(cpu_ms=0.05, io_ms=5.0, outside_ms=0.05)
    config = Config(2, 5, 8, routing="per-process")
    errors = []
    for clients, (rps, p50) in published.items():
        got = predict_closed(w, config, clients)
        errors.append(abs(got.throughput - rps) / rps)
        if clients >= 20:  # saturated: every thread busy, the rest queue
            assert got.p50_ms == pytest.approx(p50, rel=0.1)
    assert max(errors) < 0.06 and sum(errors) / len(errors) < 0.03


def test_distinct_processes_among_requests_in_service():
    from arena.model.server import _gil_parallelism as g

    assert [g(j, 4, 1, True) for j in (1, 2, 4)] == pytest.approx([1, 2, 4])  # one thread each: all distinct
    assert g(2, 2, 2, True) == pytest.approx(2 * (1 - (2 * 1) / (4 * 3)))  # 2 of 4 slots: same process 1/3 of the time
    assert g(3, 2, 2, True) == 2.0  # three requests in two 2-thread processes: both busy
    assert g(2, 4, None, True) == pytest.approx(4 * (1 - 0.75 ** 2))  # no cap: independent placement
    assert g(5, 2, 8, False) == 5.0 and g(5, 1, 8, True) == 1.0


def test_the_open_server_model_is_erlang_c_when_it_is_an_m_m_c_queue():
    # c single-threaded processes without a GIL bound, no I/O, shared queue, c cores: M/M/c
    c, service_ms, rate = 3, 10.0, 240.0
    w = Demand(cpu_ms=service_ms, io_ms=0.0)
    got = predict_open(w, Config(c, 1, c, gil=False, routing="shared"), rate)
    want = mmc(rate, service_ms / 1000, c)
    assert got.mean_ms == pytest.approx(want.response_mean * 1000, rel=1e-6)
    assert not got.overloaded and predict_open(w, Config(c, 1, c, gil=False), 300.0).overloaded


# ---------------------------------------------------------------------- the pool and the database


def test_connections_busy_counts_each_process_pool_separately():
    """2 requests over 2 processes of 2 threads, pool 1: in the same process (2 of the 6 placements)
    one connection serves, else two: 10/6. Without a thread cap each lands in a process at random:
    the same one half the time, 1.5. A pool as large as the threads never binds."""
    from arena.model.server import connections_busy

    assert connections_busy(2, 2, 2, 1) == pytest.approx(10 / 6)
    assert connections_busy(2, 2, None, 1) == pytest.approx(1.5)
    assert connections_busy(7, 1, 16, 2) == 2 and connections_busy(7, 1, 16, 16) == 7
    assert connections_busy(4, 2, 2, 1) == pytest.approx(2)  # every process holds two, serves one


def repairman(customers: int, up: float, servers: int, service_s: float) -> float:
    """Throughput of the finite-source queue M/M/c//N [Kle75]: N customers each away for an
    exponential time of mean 1/up, then served by one of c servers (exponential, mean service_s)."""
    pi = q.birth_death([(customers - j) * up for j in range(customers)],
                       [min(j + 1, servers) / service_s for j in range(customers)])
    return sum(p * min(j, servers) / service_s for j, p in enumerate(pi))


@pytest.mark.parametrize("clients,pool", [(4, 1), (8, 2), (12, 3)])
def test_the_pool_station_is_the_finite_source_queue_when_it_binds(clients, pool):
    """Clients that spend 20 ms outside and 5 ms holding one of ``pool`` connections (a thread each,
    nothing else): the model's throughput is M/M/pool//clients's exactly."""
    w = Demand(cpu_ms=0.0, io_ms=0.0, outside_ms=20.0, db_ms=5.0)
    c = Config(1, clients, 1, routing="shared", pool=pool, db_cores=8)
    got = predict_closed(w, c, clients).throughput
    assert got == pytest.approx(repairman(clients, 1 / 0.020, pool, 0.005), rel=1e-9)
    assert got < predict_closed(w, Config(1, clients, 1, routing="shared", db_cores=8), clients).throughput


def test_the_database_on_its_own_core_is_the_repairman_of_its_cpu():
    """Queries of 3 ms of which 1 ms is the database's CPU on its own single core, a pool that
    never binds: N connections cycle through 2 ms of wire and 1 ms of CPU, M/M/1//N."""
    w = Demand(cpu_ms=0.0, io_ms=0.0, db_ms=3.0, db_cpu_ms=1.0)
    for n in (1, 3, 6):
        got = predict_closed(w, Config(1, n, 4, routing="shared", db_cores=1), n).throughput
        assert got == pytest.approx(repairman(n, 1 / 0.002, 1, 0.001), rel=1e-6)


def test_a_database_sharing_the_cores_adds_its_cpu_to_the_servers():
    """1 ms of app CPU and 0.5 ms of the database's on one shared core: at most 1 / 1.5 ms; on its
    own core the server alone binds at 1 / 1 ms."""
    w = Demand(cpu_ms=1.0, io_ms=0.0, db_ms=0.6, db_cpu_ms=0.5)
    assert capacity(w, Config(1, 8, 1, routing="shared")) == pytest.approx(1000 / 1.5, rel=1e-6)
    own = predict_closed(w, Config(1, 8, 1, routing="shared", db_cores=1), 64)
    assert own.throughput == pytest.approx(1000, rel=0.01) and own.binding.startswith("GIL") is False


def test_calibration_takes_the_cpu_out_of_the_waits_around_it():
    """At the lowest load the CPU accounting (0.8 ms) and the waits (io 0.2, outside 0.2) add to
    more than the response (1.0 ms): the waits shrink together to the 0.2 ms left. The query's
    database CPU stays whole."""
    from arena.model.calibrate import Observation, calibrate

    def obs(response, timing, db_cpu=None):
        return Observation("puma", "w", 1, 4, 1, 1.0, 0.8, timing, None, response, None, False, db_cpu)

    timing = {"app": 0.5, "io": 0.2, "queue": 0.3}  # outside = 1.0 - 0.5 - 0.3 = 0.2
    cal = calibrate([obs(1.0, timing)] * 3, "puma")
    assert cal.io_ms.median == pytest.approx(0.1) and cal.outside_ms.median == pytest.approx(0.1)
    roomy = calibrate([obs(2.0, {"app": 1.2, "io": 0.2})] * 3, "puma")  # the CPU within the app: unchanged
    assert roomy.io_ms.median == pytest.approx(0.2) and roomy.outside_ms.median == pytest.approx(0.8)
    with_db = calibrate([obs(1.2, {"app": 0.7, "io": 0.5, "db": 0.45, "pool": 0.05, "queue": 0.3}, db_cpu=0.3)] * 3, "puma")
    # waits: io 0, outside 0.2, db beyond its CPU 0.15 -> room 1.2 - 0.8 - 0.3 = 0.1 of 0.35
    assert with_db.io_ms.median == pytest.approx(0.0) and with_db.db_cpu_ms.median == pytest.approx(0.3)
    assert with_db.db_ms.median == pytest.approx(0.3 + 0.15 * 0.1 / 0.35)
    assert with_db.outside_ms.median == pytest.approx(0.2 * 0.1 / 0.35)


def test_the_memory_fit_has_no_negative_term():
    """uvicorn's one worker is one process, its two are two and a supervisor: an unconstrained fit of
    26 and 110 MiB gave a base below zero. Every term is at least 0, and exact data is fitted exactly."""
    from arena.model.calibrate import Observation, memory_fit

    def seen(p, t, mib):
        return Observation("gunicorn-gthread", "default", p, t, 1.0, 1.0, 1.0, {}, None, 5.0, mib, False)

    base, per_p, per_t = memory_fit([seen(1, 1, 26.0), seen(2, 1, 110.0)])
    assert base == 0.0 and per_p == pytest.approx((26 + 110 * 2) / 5) and per_t == 0.0
    base, per_p, per_t = memory_fit([seen(1, 1, 30.0), seen(2, 1, 50.0), seen(1, 4, 36.0)])  # 10 + 18p + 2pt
    assert (base, per_p, per_t) == pytest.approx((10.0, 18.0, 2.0))


def test_a_users_apps_time_off_its_cpu_in_the_app_is_its_io():
    """The timing around a user's app reports app, cpu and cpuwall, no I/O phase: a mix whose fifth
    of requests awaits 20 ms (4 ms a request on average) is calibrated with 4 ms of I/O, not 0; the
    subjects' own I/O phase is read as before."""
    from arena.model.calibrate import Observation, calibrate

    def seen(timing, response):
        return Observation("uvicorn", "mix", 1, None, 1.0, 1.0, 1.0, timing, None, response, 30.0, False)

    users = calibrate([seen({"app": 5.2, "cpu": 1.0, "cpuwall": 1.2}, 5.6)] * 3, "uvicorn")
    assert users.io_ms.median == pytest.approx(4.0) and users.app_other_ms.median == pytest.approx(0.0)
    subject = calibrate([seen({"app": 12.0, "cpu": 1.0, "cpuwall": 1.0, "io": 10.0}, 12.5)] * 3, "uvicorn")
    assert subject.io_ms.median == pytest.approx(10.0)


@pytest.mark.parametrize("shape, draw, want", [
    # 8 ms of CPU then an exponential 30 ms wait; a lognormal of median 30 ms and sigma 0.5 above 8 ms;
    # a gamma of shape 2 and mean 20 ms above 4 ms
    ("exponential", lambda rng, n: 0.008 + rng.exponential(0.030, n), {"shift": 0.008, "mean": 0.030}),
    ("lognormal", lambda rng, n: 0.008 + rng.lognormal(math.log(0.030), 0.5, n), {"shift": 0.008, "median": 0.030,
                                                                                  "sigma": 0.5}),
    ("gamma", lambda rng, n: 0.004 + rng.gamma(2.0, 0.010, n), {"shift": 0.004, "k": 2.0, "mean": 0.020}),
])
def test_a_service_distribution_is_fitted_to_its_shape_with_its_parameters_within_5_percent(shape, draw, want):
    """model/fit.py on synthetic samples (their quantiles, as the calibration carries them): the
    right shape fits best and its parameters come back within 5%; the wrong ones fit worse."""
    import numpy as np

    from arena.model.fit import fit
    from arena.model.queueing import SERVICE_AT, SERVICE_WEIGHT

    values = np.quantile(draw(np.random.default_rng(7), 400_000), SERVICE_AT)
    fits = fit(values, SERVICE_AT, SERVICE_WEIGHT)
    best = fits[0] if fits[0].shape == shape else next(f for f in fits if f.shape == shape)
    assert best.good and best.distance <= min(f.distance for f in fits) + 0.002, [f.text for f in fits]
    got = {"shift": best.shift, **dict(best.params)}
    assert all(abs(got[k] - v) <= 0.05 * v for k, v in want.items()), (got, want)
    if shape != "exponential":  # (a gamma of shape 1 is an exponential: it fits one as well)
        assert all(f.distance > 3 * best.distance for f in fits if f.shape != shape), [f.text for f in fits]


def test_a_fixed_service_time_has_no_shape_to_fit():
    from arena.model.fit import fit
    from arena.model.queueing import SERVICE_AT, SERVICE_WEIGHT

    assert fit([0.01] * len(SERVICE_AT), SERVICE_AT, SERVICE_WEIGHT) == []


def test_pumas_inline_requests_give_one_request_in_ten_the_whole_wait():
    """The simulator's case (tests/test_sim.py): 1 process x 2 threads, 12 kept-alive clients, 5 ms
    CPU + 15 ms I/O. A thread serves 10 requests of one connection in a row while the other 10 wait:
    the first of each 10 waits ten times the FCFS wait (10 / 2 x 20 ms x 10: about 1 s, the
    simulator's 0.8-1.3 s), the next nine none. The mean is the FCFS one (the same work at the same
    rates); the FCFS p99 has no tail of seconds. As many threads as clients: nobody waits. A client
    thinking past 0.2 s comes too late for the thread that waited for it: FCFS again."""
    fixed = (0.020,) * len(q.SERVICE_AT)
    w = Demand(cpu_ms=5, io_ms=15, outside_ms=0.3, cpu_cv2=0.0, service=fixed)
    puma, fifo = (predict_closed(w, Config(1, 2, 2, routing="per-process", inline=k), 12) for k in (10, 0))
    assert puma.p50_ms < 25 and 800 < puma.p99_ms < 1300, puma
    assert fifo.p99_ms < 200 and fifo.p50_ms > 90, fifo  # its wait a gamma: 169 ms, where fixed work gives 140
    assert puma.mean_ms == pytest.approx(fifo.mean_ms) and puma.throughput == pytest.approx(fifo.throughput)
    few = predict_closed(w, Config(1, 4, 2, routing="per-process", inline=10), 4)
    assert few == predict_closed(w, Config(1, 4, 2, routing="per-process"), 4) and few.queued == 0
    late = predict_closed(w, Config(1, 2, 2, routing="per-process", inline=10), 12, think_ms=250)
    assert late.p99_ms == pytest.approx(predict_closed(w, Config(1, 2, 2, routing="per-process"), 12, 250).p99_ms)


def test_a_calibration_serves_inline_where_its_discipline_does_and_connections_stay_open():
    from dataclasses import replace

    from arena.model.calibrate import Discipline, Observation, calibrate

    def cal(server):
        return calibrate([Observation(server, "w", 1, 4, 1, 1.0, 0.8, {"app": 0.9}, None, 1.0, None, False)] * 3,
                         server)

    puma = cal("puma")
    assert puma.config(1, 2).inline == 10  # the catalog's: max_fast_inline
    assert replace(puma, keep_alive=False).config(1, 2).inline == 0
    assert replace(puma, discipline=Discipline("least-busy")).config(1, 2).inline == 0  # learned without
    assert cal("unicorn").config(2, None).inline == 0 and cal("gunicorn-gthread").config(1, 4).inline == 0


def test_more_processes_than_cpus_share_them_by_time_slices_whatever_the_cpu_times_shape():
    """Unicorn's 4 processes on one CPU, 9 ms of CPU (nearly fixed) and 31 ms of I/O a request, 6
    clients: the kernel time-slices the CPU among them, a processor-sharing station, whose
    throughput does not depend on the CPU time's shape [BCMP75]: the same as exponential CPU, and
    the simulator's (whose cores are shared so). A FCFS CPU with fixed bursts said 90 req/s; the
    held-out sweep measured 83.3. One process per CPU under a quota keeps the FCFS bursts."""
    from arena.model.sim import Dist
    from arena.model.instance_sim import Instance, Work, instance

    fixed, exp = (Demand(cpu_ms=9.08, io_ms=30.7, outside_ms=0.57, cpu_cv2=cv2) for cv2 in (0.0, 1.0))
    shared = predict_closed(fixed, Config(4, 1, 1, routing="shared"), 6).throughput
    assert shared == pytest.approx(predict_closed(exp, Config(4, 1, 1, routing="shared"), 6).throughput, rel=1e-9)
    sim = instance(Instance(4, 1, 1), Work(Dist("fixed", 0.00908), Dist("exp", 0.0307), outside=0.00057), clients=6,
                   requests=20_000, replications=2)
    assert shared == pytest.approx(sim.throughput.mean, rel=0.02) and shared < 85
    quota = predict_closed(fixed, Config(2, 1, 1, routing="shared", cpus=2), 6).throughput  # 1 core of 2 CPUs
    assert quota > predict_closed(fixed, Config(2, 1, 1, routing="shared"), 6).throughput
