"""Capacity searches on the runner: [load] find = "capacity" through the runner's seams (a fake
machine whose capacity is known), and arena tune for real: gunicorn on one CPU, a short budget."""

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from arena.app.analysis import analyses
from arena.app.run import run_file
from arena.app.report import build_report, load_results
from arena.app.tune import Request, tune
from arena.app.measurer import Stored
from arena.cli import main
from arena.errors import NotMeasured
from arena.model.capacity import WITHIN, Ask
from arena.plan.experiment import Level
from arena.plan.parse import parse_experiment
from arena.results.load_result import Histogram, LoadResult, Phase
from arena.results.store import Store
from arena.runner import Seams
from test_runner_seams import FakeProbe, FakeServer, Machine
from tests.test_guides import DOCS, reader_env, run_by, run_step


def _capacity_file(tmp_path) -> Path:
    f = tmp_path / "cap.toml"
    f.write_text('name = "cap"\nduration = "1s"\nwarmup = "0s"\n[workload]\npath = "/work"\n'
                 '[load]\nfind = "capacity"\n[goal]\np99_max = "100ms"\n[[servers]]\nserver = "puma"\nthreads = [1, 2]\n'
                 '[layout]\nserver_cpus = "1"\nload_cpus = "0"\n')
    return f


def _capacity_machine(driven: list, start_errors: float = 0.0) -> Seams:
    """A fake machine whose p99 is 20 ms up to a configuration's capacity (100 req/s a thread) and
    800 ms beyond; ``start_errors``: the share of errors of a closed run (every slot busy)."""
    current = {}

    def launch(spec):
        current["threads"] = spec.threads
        return FakeServer(spec)

    def drive(spec, cpus=None, live=None):
        driven.append(spec)
        capacity = 100.0 * current["threads"]
        rate = spec.rate if spec.rate is not None else 1.2 * capacity  # closed, every slot busy: a bit beyond
        done = int(min(rate, capacity))
        errors = 0 if spec.rate is not None else int(done * start_errors)
        p99 = 20_000 if spec.rate is None or spec.rate <= capacity else 800_000
        h = Histogram(done, 1000, p99, p99 / 2, 1.0, {"50": p99 // 2, "90": p99, "99": p99})
        phase = Phase(1.0, done + errors, done + errors, done, errors, 0, 0, spec.rate, float(done), {200: done},
                      {"reset": errors} if errors else {}, {}, 0, 0, h, h, None, None)
        return LoadResult("fake", "0", "open" if spec.rate else "closed", "u", spec.connections, spec.rate, False, phase,
                          None, [], 0.1, 0.1, 1.0, None, False, [], {"interval_s": 1.0})

    return Seams(launch=launch, drivers={"arena-load": drive}, probe=FakeProbe, idle_s=0.0, speed=lambda c: 2.0,
                 cpu_busy=lambda c: 0.0, speed_sample=None)


def test_find_capacity_in_an_experiment_file_searches_each_configuration(tmp_path):
    """A fake machine whose p99 is 20 ms up to a configuration's capacity (100 req/s a thread) and
    800 ms beyond: `arena run` of a find = "capacity" file brackets each within 5% and confirms it."""
    f = _capacity_file(tmp_path)
    driven = []
    seams = _capacity_machine(driven)
    counts = run_file(str(f), str(tmp_path / "s.db"), seams=seams)
    assert counts.failed == 0 and counts.invalid == 0
    (analysis,) = analyses(str(tmp_path / "s.db"), "cap")  # what every command renders
    found = {config: cap for config, _, cap in analysis.capacities}
    for threads, cap in ((1, found["puma[rack] t=1"]), (2, found["puma[rack] t=2"])):
        assert cap.lo <= 100 * threads < cap.hi and cap.hi / cap.lo - 1 <= WITHIN and cap.confirmed, cap
    with Store(tmp_path / "s.db") as store:
        runs = store.runs("cap")
    assert len(runs) == counts.done and all(r.why for r in runs)
    again = run_file(str(f), str(tmp_path / "s.db"), seams=seams)  # resumed: the same search, nothing new
    assert again.done == 0 and analyses(str(tmp_path / "s.db"), "cap")[0].capacities == analysis.capacities
    # the report draws the path: the rates tried in order, the p99s against the target, the steps
    built = build_report(load_results(str(tmp_path / "s.db"), "cap"))
    (path,) = [s for s in built.sections if s.key == "tuning"]
    assert [c.id for c in path.charts] == ["tuning-rates", "tuning-p99"]
    rates = {s.name: s.y for s in path.charts[0].series}
    assert set(rates) == {"puma[rack] t=1", "puma[rack] t=2"} and max(rates["puma[rack] t=2"]) > max(rates["puma[rack] t=1"])
    assert path.tables[0].title == "Capacity within the goal" and len(path.tables[0].rows) == 2
    steps = path.tables[1].rows
    assert [r[0] for r in steps] == [str(i) for i in range(1, len(steps) + 1)]
    assert sum(r[1] == "confirm" for r in steps) == 2  # one confirmation per configuration, the resumed search's own


def test_an_invalid_run_to_start_from_still_says_where_the_search_starts(tmp_path):
    """The closed run every slot busy is only where the search starts: invalid (errors here; an
    overloaded server's drift on the real machine), its throughput still places the first rate."""
    counts = run_file(str(_capacity_file(tmp_path)), str(tmp_path / "s.db"), seams=_capacity_machine([], 0.2))
    assert counts.invalid == 2  # the two closed runs
    (analysis,) = analyses(str(tmp_path / "s.db"), "cap")
    found = {config: cap for config, _, cap in analysis.capacities}
    assert found["puma[rack] t=2"].lo <= 200 < found["puma[rack] t=2"].hi and found["puma[rack] t=2"].confirmed


@pytest.mark.alone
def test_a_real_tune_keeps_its_budget_writes_a_config_gunicorn_reads_and_resumes(tmp_path):
    """docs/capacity.md's tune as the guide shows it: gunicorn-gthread on CPU 1, p99 within 200 ms, a
    40 s budget of 1 s runs (three to calibrate and one capacity search: 38 s here), then the guide's
    gunicorn --check-config of what it wrote; the same command again resumes without making any run
    twice."""
    tune_step, check_step = run_by(DOCS / "capacity.md", "test_tune.py")
    budget_s = float(re.search(r"--budget (\d+)s", tune_step.command).group(1))
    env = reader_env(COLUMNS="400")  # one line per line of output, whatever the terminal

    def run(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)

    t0 = time.monotonic()
    first = run(tune_step.command)
    took = time.monotonic() - t0
    assert first.returncode in (0, 1), first.stdout + first.stderr
    assert took < budget_s + 60, f"{took:.0f} s for a {budget_s:.0f} s budget"
    assert re.search(r"gunicorn-gthread: CPU [0-9.]+ ms/request", first.stdout), first.stdout
    assert "stopped: " in first.stdout
    out = tmp_path / "deploy"
    if first.returncode == 0:  # a choice: its capacity with an interval, and the files for it
        assert all(text in first.stdout for text in tune_step.expect), first.stdout
        chosen = re.search(r"chosen: gunicorn-gthread\[wsgi\] p=(\d+) t=(\d+): capacity ([0-9.]+) req/s "
                           r"\(interval [0-9.]+ \.\. [0-9.]+", first.stdout)
        assert chosen, first.stdout
        run_step(check_step, tmp_path, env)
        conf = subprocess.run(["gunicorn", "--print-config", "-c", "gunicorn.conf.py", "arena.subjects.python.wsgi:app"],
                              cwd=out, capture_output=True, text=True, timeout=60, env=env)
        read = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in conf.stdout.splitlines())}
        assert (read["workers"], read["threads"]) == chosen.group(1, 2)
        assert "# Written by arena tune" in (out / "gunicorn.conf.py").read_text()
    else:
        assert "no configuration was chosen" in first.stdout or "nothing kept within the goal" in first.stdout
    again = run(tune_step.command)
    assert again.returncode in (0, 1), again.stdout + again.stderr
    assert "calibration: 3 run(s) at 1 client (3 stored)" in again.stdout
    with sqlite3.connect(tmp_path / "tune.db") as db:
        keys = [k for (k,) in db.execute("SELECT run_key FROM runs")]
    assert len(keys) == len(set(keys)) and len(keys) >= 3


@pytest.mark.alone
def test_a_real_tune_at_a_fixed_concurrency_races_on_throughput_and_searches_no_capacity(tmp_path):
    """--concurrency: the race is at that many clients and compared on throughput within the goal; no
    rate is searched. 5 ms CPU and 10 ms I/O a request on one CPU: 4 threads overlap the I/O (about
    190 req/s at 8 clients), one thread per process cannot (about 65 a process), so the choice has 4
    (a 35 s budget races the best two predicted, both of 4 threads: 28 s here)."""
    store = tmp_path / "tune.db"
    got = subprocess.run([sys.executable, "-m", "arena", "tune", "--servers", "gunicorn-gthread", "--cpus", "1",
                          "--p99-max", "200ms", "--concurrency", "8", "--processes", "1,2", "--threads", "1,4",
                          "--budget", "35s", "--duration", "1s", "--store", str(store), "--name", "fixed"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "400"})
    assert got.returncode == 0, got.stdout + got.stderr
    assert re.search(r"race of \d+ at c=8, compared on throughput", got.stdout), got.stdout
    chosen = re.search(r"chosen: gunicorn-gthread\[wsgi\] p=(\d) t=(\d): ([0-9.]+) req/s at c=8", got.stdout)
    assert chosen and chosen.group(2) == "4", got.stdout
    assert "capacity" not in got.stdout.split("chosen: ")[1].splitlines()[0]
    with Store(store) as s:
        runs = s.runs("fixed")
    assert {(r.model, r.level) for r in runs} == {("closed", 1.0), ("closed", 8.0)}  # calibration, then the race
    # --json, resumed from the store: the same choice as a document of its schema, alone on standard output
    again = subprocess.run(got.args + ["--json"], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "COLUMNS": "400"})
    assert again.returncode == 0, again.stdout + again.stderr
    doc = json.loads(again.stdout)
    schema = json.loads((Path(__file__).resolve().parents[1] / "schemas" / "tune.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert (doc["chosen"]["server"], doc["chosen"]["threads"]) == ("gunicorn-gthread", 4) and doc["load"] == "c=8"
    assert doc["chosen"]["capacity"] is None and "gunicorn-gthread" in doc["calibration"]
    assert "race of" in again.stderr  # the steps, said as they go
    with Store(store) as s:
        # nothing run twice: every run of the first tune kept as it was made. The resumed tune has its
        # budget anew and may make runs the first did not (14 against 11 once, in a full suite).
        assert {(r.run_key, r.started_at) for r in runs} <= {(r.run_key, r.started_at) for r in s.runs("fixed")}


def test_show_prints_and_validates_the_capacities_of_a_search(tmp_path, capsys):
    """arena show of a capacity search: a line per configuration, and the capacities in --json."""
    # stored runs of one configuration at three open rates: within, within (3 runs), beyond
    exp = parse_experiment({"name": "cap", "duration": "1s", "warmup": "0s", "workload": {"path": "/work"},
                            "load": {"find": "capacity"}, "goal": {"p99_max": "100ms"},
                            "servers": [{"server": "puma", "threads": 2}],
                            "layout": {"server_cpus": "1", "load_cpus": "0"}}, "cap.toml")
    m = Machine()
    stored = Stored(exp, str(tmp_path / "s.db"), m.seams(), lambda e: None, {"k": (exp.servers[0], exp.workloads[0])})
    stored.measure([Ask("k", Level("open", r), n, "test") for r, n in ((90.0, 1), (100.0, 1), (100.0, 2), (100.0, 3))])
    assert main(["show", "cap", "--store", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "capacity of puma[rack] t=2: at least 100 req/s (no rate tried failed)" in out
    assert main(["show", "cap", "--store", str(tmp_path / "s.db"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    schema = json.loads((Path(__file__).parents[1] / "schemas" / "answer.schema.json").read_text())
    jsonschema.validate(doc, schema)
    (cap,) = doc["capacities"]
    assert (cap["capacity_rps"], cap["beyond_rps"], cap["runs"], cap["confirmed"]) == (100.0, None, 3, True)


@pytest.mark.parametrize("flag", ["--memory-max", "--memory-limit"])
def test_a_memory_limit_below_one_idle_process_is_refused_before_any_run(tmp_path, flag):
    """The PSS budget (--memory-max) and the container's hard limit (--memory-limit) alike: below what
    one idle process of every server takes, bad input in one line, no run made."""
    store = tmp_path / "t.db"
    got = subprocess.run([sys.executable, "-m", "arena", "tune", "--servers", "gunicorn-gthread", "--cpus", "1",
                          "--p99-max", "200ms", flag, "8MiB", "--store", str(store)],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 2, got.stdout + got.stderr
    (line,) = got.stderr.splitlines()
    assert re.fullmatch(rf"arena: error: {flag} 8MiB: below one idle process of every server tried \(the "
                        r"smallest: gunicorn-gthread 1x1 at \d+ MiB PSS\)", line), line
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)


def test_calibration_runs_that_all_fail_are_a_failed_measurement_not_bad_input(tmp_path, monkeypatch):
    """Every calibration run invalid (errors here; a neighbour on the CPUs in practice): exit 1 with the
    runs' flags, not the bad-input status."""
    broken = Machine(errors_per_run=5000)
    # servers without a threads knob (uvicorn) or a processes knob (waitress) take part as well
    request = Request(server_cpus=(1,), load_cpus=(0,), p99_ms=200.0, servers=("gunicorn-gthread", "uvicorn", "waitress"),
                      budget_s=120.0)
    with pytest.raises(NotMeasured, match=r"no server could be calibrated: gunicorn-gthread: could not be calibrated: "
                                          r".*\(its runs: .*errors.*; uvicorn: .*; waitress: "):
        tune(request, str(tmp_path / "t.db"), seams=broken.seams())
    monkeypatch.setattr("arena.cli.tune.tune", lambda *a, **k: (_ for _ in ()).throw(NotMeasured("calibration failed")))
    assert main(["tune", "--servers", "gunicorn-gthread", "--cpus", "1", "--p99-max", "200ms",
                 "--store", str(tmp_path / "t.db")]) == 1


def _pid(_) -> int:
    return os.getpid()


def test_the_predictions_spread_over_the_cpus_are_those_made_here_and_the_workers_end_with_them():
    import psutil

    from arena.app.predict import given_calibration, over_the_cpus
    from arena.app.tune import space
    from arena.model.contenders import contenders_of, key_for

    cals = {"gunicorn-gthread": given_calibration("gunicorn-gthread", 1, 6.6, 9.6)}
    request = Request((1,), (0,), 60.0, processes=(1, 2), threads=(1, 4))  # tight: each point's search halves
    names = {key_for("gunicorn-gthread", p, t): f"p={p} t={t}" for p in (1, 2) for t in (1, 4)}
    def grid(s: str) -> list:
        return space(request, s, 1.0)

    here, points = contenders_of(cals, grid, names, request.goal, request.load)
    with over_the_cpus() as map_fn:
        assert contenders_of(cals, grid, names, request.goal, request.load, map_fn=map_fn) == (here, points)
        workers = set(map_fn(_pid, range(16)))
    assert points == 4 and len({c.predicted for c in here}) > 1
    assert workers and os.getpid() not in workers and not any(psutil.pid_exists(pid) for pid in workers)


def test_the_space_tune_considers_is_the_models_grid_or_the_counts_given():
    """--processes/--threads: the user's own counts in place of the model's grid, on the knobs each
    server has (gunicorn-sync has no threads; uvicorn neither); the stored experiment holds them."""
    from arena.app.tune import definition, space
    from arena.model.recommend import grid

    base = Request((1,), (0,), 200.0)
    assert space(base, "gunicorn-gthread", 1) == grid("gunicorn-gthread", 1)
    given = Request((1,), (0,), 200.0, processes=(1, 3), threads=(2, 7))
    assert space(given, "gunicorn-gthread", 1) == [(1, 2), (1, 7), (3, 2), (3, 7)]
    assert space(given, "gunicorn-sync", 1) == [(1, None), (3, None)]
    entry = next(e for e in definition(given, ["gunicorn-gthread"], 1)["servers"])
    assert {3, 1} <= set(entry["processes"]) and {2, 7} <= set(entry["threads"])
    exp = parse_experiment(definition(given, ["gunicorn-gthread"], 1), "tune")
    assert {(c.processes, c.threads) for c in exp.servers} >= {(1, 2), (1, 7), (3, 2), (3, 7)}


def test_a_knob_of_one_interface_only_is_left_out_of_the_grid_of_an_app_of_the_other(tmp_path):
    """granian's threads (--blocking-threads) are WSGI's only: an ASGI app's grid has none, so the
    experiment parses and granian stays in the race; a WSGI app's grid keeps them."""
    from arena.app.tune import _calibration_points, definition, space

    (tmp_path / "main.py").write_text("async def app(scope, receive, send):\n    pass\n")
    asgi = Request((1,), (0,), 200.0, app="main:app", app_options={"chdir": str(tmp_path), "interface": "asgi"})
    assert {t for _, t in space(asgi, "granian", 1)} == {None}
    assert {t for _, t in _calibration_points(asgi, "granian", 1)} == {None}
    exp = parse_experiment(definition(asgi, ["uvicorn", "granian"], 1), "tune")
    assert {c.server for c in exp.servers} == {"uvicorn", "granian"} and {c.threads for c in exp.servers} == {None}
    wsgi = Request((1,), (0,), 200.0, app="main:app", app_options={"chdir": str(tmp_path), "interface": "wsgi"})
    assert {t for _, t in space(wsgi, "granian", 1)} > {1, 2}


def test_tune_under_a_containers_limits_measures_every_configuration_under_them():
    """--cpu-limit/--memory-limit: every configuration of the stored experiment runs under them (named
    so), the model's cores are the quota where it is below the CPUs, and the hard limit bounds the
    configurations that fit as --memory-max does, whichever is smaller (said by its own flag)."""
    from arena.app.tune import definition
    from arena.limits import Limits

    req = Request((0, 1), (0,), 200.0, servers=("puma",), limits=Limits(cpu=1.0, memory_mib=512))
    assert req.cores == 1.0 and Request((1,), (0,), 200.0, limits=Limits(cpu=1.5)).cores == 1.0
    assert req.memory_bound == (512, "--memory-limit")
    assert Request((1,), (0,), 200.0, memory_mib=300, limits=req.limits).memory_bound == (300, "--memory-max")
    assert Request((1,), (0,), 200.0).memory_bound is None
    exp = parse_experiment(definition(req, ["puma"], req.cores), "tune")
    assert exp.servers and all(c.limits == Limits(cpu=1.0, memory_mib=512) for c in exp.servers)
    assert all(c.name.endswith(" cpu=1 mem=512MiB") for c in exp.servers), [c.name for c in exp.servers]
    assert definition(req, ["puma"], 1.0)["name"] != definition(Request((0, 1), (0,), 200.0, servers=("puma",)),
                                                                ["puma"], 1.0)["name"]



def test_tune_under_a_logs_profile_searches_capacity_at_its_shape(tmp_path, capsys):
    """--profile: the capacity search's open loads follow the log's arrival times (the experiment's
    [load] profile, its paths made absolute); refused with a closed load, and where the log is not."""
    from arena.app.tune import definition
    from arena.cli import main

    log = tmp_path / "access.log"
    log.write_text("".join(f'1.2.3.4 - - [14/Nov/2023:22:13:{s:02d} +0000] "GET / HTTP/1.1" 200 2\n' for s in range(9)))
    req = Request((1,), (0,), 200.0, servers=("puma",), profile=(str(log),))
    exp = parse_experiment(definition(req, ["puma"], 1.0), "tune")
    assert exp.find == "capacity" and exp.profile == (str(log),) and exp.arrival == "schedule"
    assert main(["tune", "--cpus", "1", "--p99-max", "200ms", "--profile", str(tmp_path / "none.log")]) == 2
    assert capsys.readouterr().err.strip() == f"arena: error: --profile {tmp_path}/none.log: no such log file"
    assert main(["tune", "--cpus", "1", "--p99-max", "200ms", "--profile", str(log), "--concurrency", "4"]) == 2
    assert "--profile, --concurrency: a profile shapes an open load" in capsys.readouterr().err
