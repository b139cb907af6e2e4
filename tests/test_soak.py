"""A soak's memory over requests (results/soak.py) from a run's per-interval completions per process
and its probe's per-process PSS samples, against known lines; and a real soak of /leak."""

import dataclasses
import os
import subprocess
import sys

import pytest

from arena.limits import MiB
from arena.results.load_result import SeriesPoint
from arena.results.soak import soak_of
from arena.results.store import Store
from tests.conftest import leak_experiment, report_store, require_server


def a_run(samples, intervals, limit_mib=None, valid=True):
    """The report fixture's first run with these per-process samples [(t, {pid: MiB})] and these
    per-second completions [{pid: n}] (its series), under ``limit_mib``."""
    with Store(report_store()) as s:
        run = s.runs("tiny-grid")[0]
    load = run.load
    series = [SeriesPoint(float(i), n_sum, n_sum, 0, None, None, None, None, None, per)
              for i, per in enumerate(intervals) for n_sum in [sum(per.values())]]
    resources = dataclasses.replace(run.resources, pss_series=[(t, {str(p): int(m * MiB) for p, m in by.items()})
                                                               for t, by in samples], window_s=float(len(intervals)))
    return dataclasses.replace(run, resources=resources, stored_load=dataclasses.replace(load, series=series),
                               launch={"limits": {"cpu": None, "cpu_period_s": 0.1, "memory_mib": limit_mib}},
                               valid=valid, flags=() if valid else ("out of memory: ...",))


def test_each_workers_growth_is_its_memory_against_the_requests_it_served():
    """pid 7 serves 10 a second and keeps 0.05 MiB each; pid 8 serves 6 a second and keeps 0.02 MiB
    each; the master (pid 1) serves none. Sampled every 5 s of 30: growth 50 and 20 MiB per 1,000
    requests exactly; a process that joins is counted; at a 512 MiB limit, the requests left and the
    max_requests that keeps the set a tenth under it follow from the lines."""
    intervals = [{7: 10, 8: 6}] * 30
    samples = [(t, {1: 15.0, 7: 20 + 0.05 * 10 * t, 8: 30 + 0.02 * 6 * t, **({9: 18.0} if t >= 20 else {})})
               for t in range(0, 31, 5)]
    s = soak_of(a_run(samples, intervals, limit_mib=512))
    by = {w.pid: w for w in s.workers}
    assert set(by) == {7, 8}  # the processes that served requests
    assert by[7].growth == pytest.approx((50.0, 50.0, 50.0)) and by[8].growth == pytest.approx((20.0, 20.0, 20.0))
    assert by[7].requests == 300 and by[7].points[1] == pytest.approx((50.0, 22.5))
    assert (s.started, s.gone) == (1, 0) and s.growth == pytest.approx(35.0)
    last = 15 + 20 + 15 + 30 + 3.6 + 18
    assert s.last_mib == pytest.approx(last, abs=1e-3)
    assert s.requests_to_limit() == pytest.approx((512 - last) / 35 * 1000, rel=1e-6)
    base = last - 35 * 480 / 1000  # the set with no request served: 480 served in all
    assert s.max_requests() == int((512 * 0.9 - base) / (2 * 35 / 1000))


def test_a_sample_between_intervals_counts_the_part_of_the_interval_before_it():
    s = soak_of(a_run([(0, {7: 10.0}), (2.5, {7: 11.0}), (5, {7: 12.0})], [{7: 4}] * 5))
    (w,) = s.workers
    assert [x for x, _ in w.points] == [0.0, 10.0, 20.0] and w.growth == pytest.approx((100.0, 100.0, 100.0))


def test_a_run_without_per_process_samples_is_no_soak_and_too_few_samples_tell_no_growth():
    with Store(report_store()) as s:
        assert soak_of(s.runs("tiny-grid")[0]) is None
    short = soak_of(a_run([(0, {7: 10.0}), (5, {7: 11.0})], [{7: 4}] * 5))
    assert short.workers[0].growth is None and short.growth is None and short.max_requests() is None


LEAK = leak_experiment("soak", 50, 30, "1GiB", length="", load='soak = "30s"\nsoak_every = "2s"\n', warmup="1s")


@pytest.mark.integration
def test_a_soak_of_leak_tells_each_workers_growth_within_15_percent_of_the_truth(tmp_path):
    """/leak?kb=50 keeps 50 KiB a request in the worker that serves it: 48.8 MiB per 1,000 requests.
    A 30 s soak at 30 req/s over two gunicorn workers, sampled every 2 s, tells each one's growth
    within 15% of that, and what it comes to at a 1 GiB limit."""
    require_server("gunicorn-sync")
    (tmp_path / "soak.toml").write_text(LEAK)
    store = str(tmp_path / "s.db")
    ran = subprocess.run([sys.executable, "-m", "arena", "run", "soak.toml", "--store", store], cwd=tmp_path,
                         capture_output=True, text=True, timeout=180)
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    with Store(store) as s:
        (run,) = s.runs("soak")
    soak = soak_of(run)
    assert soak is not None and len(soak.workers) == 2, soak
    truth = 50 / 1024 * 1000
    for w in soak.workers:
        assert w.growth is not None and abs(w.growth[0] - truth) <= 0.15 * truth, (w.pid, w.growth)
        assert w.growth[1] <= truth * 1.15 and w.growth[2] >= truth * 0.85
    shown = subprocess.run([sys.executable, "-m", "arena", "show", "soak", "--store", store], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "COLUMNS": "250"}).stdout
    assert "Soak of gunicorn-sync[wsgi] p=2 mem=1GiB at 30 req/s over 30 s" in shown, shown
    assert "at its 1GiB limit: the processes' PSS reaches it after about" in shown and "max_requests = " in shown, shown


def test_a_soak_shorter_than_30_seconds_or_beside_a_duration_is_refused(tmp_path):
    for change, said in (('soak = "30s"', 'load.soak = "10s": must be a duration of at least 30s'),
                         ('soak_every = "2s"', 'load.soak_every = "20s": must be a duration from 1s to 60s')):
        bad = LEAK.replace(change, change.replace("30s", "10s").replace('"2s"', '"20s"'))
        (tmp_path / "bad.toml").write_text(bad)
        got = subprocess.run([sys.executable, "-m", "arena", "run", "bad.toml", "--dry-run"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert got.returncode == 2 and said in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr
    (tmp_path / "both.toml").write_text('duration = "10s"\n' + LEAK)
    got = subprocess.run([sys.executable, "-m", "arena", "run", "both.toml", "--dry-run"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 2 and "a soak's length is [load] soak" in got.stderr, got.stderr
