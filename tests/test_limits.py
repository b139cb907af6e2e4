"""Limits as deployed, on real cgroups: a CPU quota on a real server's process set, its throttling
measured per run and said where the run's figures are."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import leak_experiment, require_server

# Puma 2x4 on CPU 1 at four clients of 5 ms CPU, under a 0.5-core quota and without (docs/why.md's too)
QUOTA = (Path(__file__).resolve().parents[1] / "examples" / "why" / "quota.toml").read_text()


@pytest.mark.alone
def test_a_cpu_quota_holds_a_real_server_back_and_its_throttling_is_stored(tmp_path):
    """Puma 2x4 on CPU 1 with four clients of 5 ms CPU each keeps the CPU busy; under a 0.5-core
    quota it serves about half as much, with a higher p99, and its runs store the time it was
    throttled (export's throttled_ms), said in the run's line and as show's column."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    require_server("puma")
    (tmp_path / "quota.toml").write_text(QUOTA)
    store = str(tmp_path / "q.db")
    env = {**os.environ, "COLUMNS": "200"}
    ran = subprocess.run([sys.executable, "-m", "arena", "run", "quota.toml", "--store", store], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "puma[rack] p=2 t=4 cpu=0.5 c=4 #1:" in ran.stdout and "by its CPU quota, in" in ran.stdout, ran.stdout
    runs = json.loads(subprocess.run([sys.executable, "-m", "arena", "export", "quota", "--store", store, "--format",
                                      "json"], capture_output=True, text=True, timeout=60, check=True).stdout)
    by = {r["config"]: r for r in runs}
    limited, free = by["puma[rack] p=2 t=4 cpu=0.5"], by["puma[rack] p=2 t=4"]
    assert limited["launch"]["limits"] == {"cpu": 0.5, "cpu_period_s": 0.1, "memory_mib": None}
    assert "limits" not in free["launch"]
    assert limited["throttled_ms"] > 200 and limited["resources"]["cpu_throttled_periods"] > 5, limited["resources"]
    assert free["throttled_ms"] == 0
    used = limited["resources"]
    assert (used["cpu_user_s"] + used["cpu_system_s"]) / used["window_s"] <= 0.55  # the quota's half a core
    assert limited["throughput"] < 0.7 * free["throughput"] and limited["p99_us"] > free["p99_us"]
    from arena.results.aggregate import aggregate
    from arena.results.store import Store

    from arena.results.answer import binding

    with Store(store) as s:
        cells = {c.config: c for c in aggregate(s.runs("quota"))}
    held = cells["puma[rack] p=2 t=4 cpu=0.5"]  # the wait for the quota's next period, its own part
    parts = held.decomposition
    assert parts["CPU quota wait"] > 1.0 and cells["puma[rack] p=2 t=4"].decomposition["CPU quota wait"] is None
    assert re.fullmatch(r"CPU: (9\d|1\d\d)% of its 0.5-core quota busy, throttled \d+ ms a second", binding(held))
    shown = subprocess.run([sys.executable, "-m", "arena", "show", "quota", "--store", store], capture_output=True,
                           text=True, timeout=60, env=env)
    assert "throttled ms/s" in shown.stdout, shown.stdout
    # named as a pathology in the limited configuration alone, with the unlimited one's p99 beside it
    from arena.results.why.diagnose import diagnose

    (found,) = diagnose(list(cells.values())).found
    assert (found.key, found.label) == ("throttling", "puma[rack] p=2 t=4 cpu=0.5")
    assert found.effect_p99_ms == pytest.approx((held.p99_us.median - cells["puma[rack] p=2 t=4"].p99_us.median) / 1000)
    # the share of requests that met it, from the timing around each (Server-Timing throttled): a
    # fraction of them, each held back at most one period's unspent part (0.1 s - 0.05 s) or so
    figures = {e.what: e.value for e in found.evidence}
    assert 5 <= figures["requests that met it"] <= 100 and 5 <= figures["their time held back p99"] <= 80, figures
    (free_run,) = cells["puma[rack] p=2 t=4"].runs
    assert "throttled" not in free_run.load.measured.server_timing  # no quota, no metric
    assert "CPU throttling by the container's CPU quota" in shown.stdout and "sched-bwc" in shown.stdout


def test_a_file_with_limits_this_machine_cannot_set_is_refused_before_any_run(tmp_path):
    """Without a writable cgroup (ARENA_CGROUP=none: process tracking), a quota cannot be set: the
    file is refused in one line naming the limit and what is missing, exit 2, no store made."""
    (tmp_path / "quota.toml").write_text(QUOTA)
    got = subprocess.run([sys.executable, "-m", "arena", "run", "quota.toml", "--store", "q.db"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, env={**os.environ, "ARENA_CGROUP": "none"})
    assert got.returncode == 2, got.stdout + got.stderr
    assert got.stderr.strip().splitlines()[-1] == (
        "arena: error: quota.toml: cpu_limit = 0.5 (puma[rack] p=2 t=4 cpu=0.5): needs a cgroup controller, and Arena "
        "confines servers by process tracking here (no writable cgroup hierarchy)")
    assert not (tmp_path / "q.db").exists()


@pytest.mark.integration
def test_check_runs_a_server_under_the_limits_its_flags_give():
    """arena check --cpu-limit --memory-limit: the conformance requests pass under a quota and a
    memory limit; a period alone, or a quota of none, is refused in one line."""
    require_server("gunicorn-sync")
    ok = subprocess.run([sys.executable, "-m", "arena", "check", "gunicorn-sync", "--app", "wsgi", "--cpu-limit", "0.5",
                         "--memory-limit", "256MiB"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "1 passed, 0 failed" in ok.stdout, ok.stdout + ok.stderr
    for flags, said in ((["--cpu-period", "50ms"], "--cpu-period 50ms: is the period of --cpu-limit"),
                        (["--cpu-limit", "0"], "argument --cpu-limit: must be a number of cores above 0")):
        bad = subprocess.run([sys.executable, "-m", "arena", "check", "gunicorn-sync", *flags], capture_output=True,
                             text=True, timeout=60)
        assert bad.returncode == 2 and said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_runs_flags_set_the_limits_of_every_server_entry_as_the_file_would(tmp_path):
    """arena run --cpu-limit --memory-limit: every [[servers]] entry gets them (its configurations
    named so in the plan), over what the file says; a quota above this machine's cores is refused."""
    (tmp_path / "plain.toml").write_text(QUOTA.replace('cpu_limit = [0.5, "none"]\n', "")
                                         + '[[servers]]\nserver = "unicorn"\nprocesses = 2\ncpu_limit = 1\n')
    got = subprocess.run([sys.executable, "-m", "arena", "run", "plain.toml", "--store", "p.db", "--dry-run",
                          "--cpu-limit", "0.5", "--memory-limit", "512MiB"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert got.returncode == 0, got.stdout + got.stderr
    assert "puma[rack] p=2 t=4 cpu=0.5 mem=512MiB" in got.stdout, got.stdout
    assert "unicorn[rack] p=2 cpu=0.5 mem=512MiB" in got.stdout, got.stdout
    bad = subprocess.run([sys.executable, "-m", "arena", "run", "plain.toml", "--dry-run", "--cpu-limit", "64"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "argument --cpu-limit: must be a number of cores above 0" in bad.stderr, bad.stderr


LEAK = leak_experiment("leak", 1024, 100, "120MiB")


@pytest.mark.integration
def test_a_worker_killed_at_the_memory_limit_makes_the_run_invalid_and_is_named(tmp_path):
    """/leak keeps 1 MiB a request: two gunicorn workers pass a 120 MiB limit within about 90
    requests, and the kernel kills one. The run is stored invalid with the OOM kill as its first
    cause, naming the process, the limit and the peak; arena run exits 1; show leaves it out by that
    cause."""
    require_server("gunicorn-sync")
    (tmp_path / "leak.toml").write_text(LEAK)
    store = str(tmp_path / "l.db")
    ran = subprocess.run([sys.executable, "-m", "arena", "run", "leak.toml", "--store", store], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert ran.returncode == 1, ran.stdout + ran.stderr
    said = re.search(r"INVALID: out of memory: the kernel killed \d+ process(es)? of the server at its 120MiB limit "
                     r"\(peak 1[12]\d\.\d MiB\); of the 3 it began with, pid \d+(, \d+)? (is|are) gone", ran.stdout)
    assert said, ran.stdout
    (run,) = json.loads(subprocess.run([sys.executable, "-m", "arena", "export", "leak", "--store", store, "--format",
                                        "json"], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert not run["valid"] and run["flag_kinds"][0] == "out of memory", run["flags"]
    assert run["launch"]["limits"]["memory_mib"] == 120
    assert 115 * 1024 * 1024 <= run["resources"]["memory_peak_bytes"] <= 120 * 1024 * 1024
    shown = subprocess.run([sys.executable, "-m", "arena", "show", "leak", "--store", store], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "COLUMNS": "300"})
    assert "Left out (invalid runs): 1 for out of memory." in shown.stdout, shown.stdout
    assert "OOM kills at the container's memory limit (processes killed " in shown.stdout, shown.stdout


def test_a_servers_documented_process_count_counts_the_nodes_cores_not_the_quota():
    """servers/sizing.py: gunicorn's 2 x cores + 1 on a 64-core node is 129 under a quota of one
    CPU (3 if it counted the quota, a half CPU rounded up to one); a fixed count stays; every server
    of the catalog has its entry."""
    from arena.servers import catalog
    from arena.servers.sizing import SIZINGS

    assert set(SIZINGS) == set(catalog.CATALOG)
    g = SIZINGS["gunicorn-sync"]
    assert (g.processes(64), g.processes(1), g.processes(0.5), g.processes(1.5)) == (129, 3, 3, 5)
    assert g.inside(64, 1) == "129 on a node of 64 cores (it counts the node's); 3 if it counted the quota of 1"
    assert SIZINGS["passenger"].inside(64, 1) == "6, whatever the node or the quota"
    assert SIZINGS["unicorn"].processes(8) == 8 and SIZINGS["uvicorn"].processes(64) == 1


def test_arena_servers_says_what_each_documented_count_becomes_on_a_node_under_a_quota():
    from pathlib import Path

    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[1] / "schemas" / "servers.schema.json").read_text())
    got = subprocess.run([sys.executable, "-m", "arena", "servers", "--json", "--node-cores", "64", "--cpu-limit", "1"],
                         capture_output=True, text=True, timeout=60, check=True)
    doc = json.loads(got.stdout)
    jsonschema.Draft202012Validator(schema).validate(doc)
    sized = {s["name"]: s["sizing"] for s in doc["servers"]}
    assert (sized["gunicorn-gthread"]["on_node"], sized["gunicorn-gthread"]["for_quota"]) == (129, 3)
    assert (sized["passenger"]["on_node"], sized["passenger"]["for_quota"]) == (6, 6)
    assert (doc["node_cores"], doc["cpu_limit"]) == (64, 1)
    text = subprocess.run([sys.executable, "-m", "arena", "servers", "--node-cores", "64", "--cpu-limit", "1"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "250"}).stdout
    assert "inside a container (a node of 64 cores, cpu_limit 1)" in text and "A quota is not a core count" in text
    bad = subprocess.run([sys.executable, "-m", "arena", "servers", "--node-cores", "0"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "--node-cores" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_the_container_scenario_plans_the_documented_count_against_the_quotas_under_one_cpu():
    """scenarios/container.toml: gunicorn's documented 2 x cores + 1 on this machine's cores against
    fewer, each under a 1-CPU quota over every CPU."""
    from pathlib import Path

    from arena.limits import Limits
    from arena.plan.parse import load_experiment
    from arena.servers.sizing import SIZINGS

    exp = load_experiment(Path(__file__).resolve().parents[1] / "scenarios" / "container.toml")
    assert {c.limits for c in exp.servers} == {Limits(cpu=1.0)} and exp.shared
    assert SIZINGS["gunicorn-sync"].processes(2) in {c.processes for c in exp.servers}  # on this 2-core machine
    assert min(c.processes for c in exp.servers) == 1 and len(exp.server_cpus) == 2


def test_the_reports_method_says_what_a_documented_count_comes_to_for_a_server_run_under_a_quota():
    import dataclasses

    from arena.report.data import container_lines
    from arena.results.store import Store
    from tests.conftest import report_store

    with Store(report_store()) as s:
        runs = s.runs("tiny-grid")
    assert container_lines(runs, 2) == []  # no run under a quota: nothing to say
    gthread = [dataclasses.replace(r, launch={"limits": {"cpu": 0.5, "cpu_period_s": 0.1, "memory_mib": None}})
               for r in runs if r.server == "gunicorn-gthread"]
    (line, why) = container_lines(gthread, 64)
    assert line.startswith("Inside a container on this machine as its node: gunicorn-gthread's documented process "
                           "count, 2 x cores + 1 workers") and "129 on a node of 64 cores" in line
    assert "3 if it counted the quota of 0.5" in line and why.startswith("A quota is not a core count")


@pytest.mark.integration
def test_a_memory_limit_below_what_a_server_takes_to_start_says_so(tmp_path):
    """8 MiB (above the smallest limit a container runtime sets) cannot hold a gunicorn process
    starting: the kernel kills it before it is ready, and the failed run says that it was the limit,
    not a broken server (exit 1, the run kept as failed)."""
    require_server("gunicorn-sync")
    (tmp_path / "tiny.toml").write_text(LEAK.replace('memory_limit = "120MiB"', 'memory_limit = "8MiB"'))
    ran = subprocess.run([sys.executable, "-m", "arena", "run", "tiny.toml", "--store", "t.db"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert re.search(r"FAILED: the server did not start: gunicorn-sync \(wsgi\) exited with code -9 before it was "
                     r"ready: the kernel killed \d+ of its processes at its memory limit of 8MiB \(memory_limit\) "
                     r"while it started", ran.stdout), ran.stdout


def test_flags_and_tunes_definition_carry_typed_values_and_the_period_rule_is_one(monkeypatch):
    """run's limit flags reach the file's reader as numbers (seconds, MiB), not text made to be
    parsed again; so do tune's goal and limits in the definition it stores; and the one rule across
    the limits' keys (a period needs its quota) is limits.period_problem, asked by the flags and by
    the file alike."""
    from arena import limits
    from arena.app.tune import Request, definition
    from arena.cli import build_parser
    from arena.cli.args import overrides_of
    from arena.errors import ArenaError
    from arena.plan.parse import parse_experiment

    args = build_parser().parse_args(["run", "x.toml", "--cpu-limit", "0.5", "--cpu-period", "50ms",
                                      "--memory-limit", "1GiB"])
    assert overrides_of(args).servers == (("cpu_limit", 0.5), ("cpu_period", 0.05), ("memory_limit", 1024.0))
    req = Request((1,), (0,), 200.0, 512.0, 1.0, ("gunicorn-sync",), limits=limits.Limits(0.5, 0.05, 256.0))
    doc = definition(req, ["gunicorn-sync"], 0.5)
    assert doc["goal"] == {"p99_max": 0.2, "error_max": 0.01, "memory_max": 512.0}
    assert {k: doc["servers"][0][k] for k in ("cpu_limit", "cpu_period", "memory_limit")} == \
        {"cpu_limit": 0.5, "cpu_period": 0.05, "memory_limit": 256.0}
    asked = []
    rule = limits.period_problem
    for where in ("arena.cli.args", "arena.plan.grid"):
        monkeypatch.setattr(f"{where}.period_problem", lambda *a: asked.append(a) or rule(*a))
    with pytest.raises(ArenaError, match="is the period of --cpu-limit: give --cpu-limit too"):
        overrides_of(build_parser().parse_args(["run", "x.toml", "--cpu-period", "50ms"]))
    with pytest.raises(ArenaError, match="is the period of cpu_limit: give cpu_limit too"):
        parse_experiment({"name": "p", "servers": [{"server": "puma", "cpu_period": 0.05}]}, "p.toml")
    assert [a[2] for a in asked] == ["--cpu-limit", "cpu_limit"]
