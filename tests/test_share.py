"""A one-CPU mode: ``[layout] share = true`` (``--share-cpus`` on run and tune) lets the server and
the load generator share a CPU knowingly. Without it one CPU is refused with that advice; with it,
every run is marked (its figures include the generator's cost), the generator's CPU is not counted
as a neighbour's, and a shared run is never compared with one on disjoint CPUs."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from arena.errors import ArenaError
from arena.plan.parse import default_layout, parse_experiment
from arena.results.aggregate import aggregate
from arena.results.comparison import changes
from arena.results.runs import SHARED
from arena.results.store import Store
from tests.conftest import report_store, require_server

ARENA = [sys.executable, "-m", "arena"]
ONE = """\
name = "one-cpu"
duration = "1s"
warmup = "200ms"
repetitions = 2
speed_threshold = 10
others_threshold = 1
[load]
concurrency = [1]
[[servers]]
server = "gunicorn-gthread"
threads = 2
"""


def test_one_cpu_is_refused_with_the_advice_unless_shared():
    with pytest.raises(ArenaError, match=r"^layout: this machine has one CPU; .* \[layout\] share = true in the "
                                         r"experiment, or --share-cpus"):
        default_layout([0])
    assert default_layout([0], share=True) == ((0,), (0,))
    assert default_layout([0, 1], share=True) == ((1,), (0,))  # two CPUs: nothing to share
    base = {"name": "s", "load": {"concurrency": [1]}, "servers": [{"server": "puma"}]}
    with pytest.raises(ArenaError, match=r'layout.load_cpus = "0": must not overlap server_cpus \(both have 0\), unless '
                                         "share = true"):
        parse_experiment({**base, "layout": {"server_cpus": "0", "load_cpus": "0"}}, "s.toml")
    exp = parse_experiment({**base, "layout": {"server_cpus": "0", "load_cpus": "0", "share": True}}, "s.toml")
    assert exp.shared and exp.server_cpus == exp.load_cpus == (0,)
    assert not parse_experiment({**base, "layout": {"server_cpus": "1", "load_cpus": "0", "share": True}}, "s.toml").shared


def test_a_shared_cell_is_never_compared_with_one_on_disjoint_cpus():
    with Store(report_store(), readonly=True) as s:
        runs = s.runs("tiny-grid")
    shared = [dataclasses.replace(r, environment=dataclasses.replace(r.environment, load_cpus=r.environment.server_cpus))
              for r in runs]
    assert all(r.shared for r in shared) and not any(r.shared for r in runs)
    found, alone = changes(aggregate(runs), aggregate(shared))
    assert found == [] and len(alone) == len(aggregate(runs))
    assert all(a.startswith("not compared: ") and a.endswith(f"sharing CPUs in the new only ({SHARED})") for a in alone)
    assert changes(aggregate(shared), aggregate(shared))[0]  # shared with shared: compared


@pytest.mark.alone  # both runs valid on CPU 0: a neighbour test there starves the generator (139 ms, seen)
def test_on_one_cpu_a_shared_run_is_valid_and_marked(tmp_path):
    """Under taskset -c 0 (a one-CPU machine): refused without --share-cpus; with it, both runs valid
    (the generator on the server's CPU is not a neighbour), each marked in its line, in show, and in
    the stored environment."""
    require_server("gunicorn-gthread")
    (tmp_path / "one.toml").write_text(ONE)

    def arena(*argv):
        return subprocess.run(["taskset", "-c", "0", *ARENA, *argv], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "COLUMNS": "400"})  # a run's line on one line

    refused = arena("run", "one.toml", "--store", "s.db", "--dry-run")
    assert refused.returncode == 2 and "--share-cpus" in refused.stderr and refused.stderr.count("\n") == 1
    done = arena("run", "one.toml", "--store", "s.db", "--share-cpus")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("  gunicorn-gthread")]
    assert len(lines) == 2 and all(f"({SHARED})" in line and "INVALID" not in line for line in lines), done.stdout
    shown = arena("show", "one-cpu", "--store", "s.db")
    assert SHARED in shown.stdout
    exported = json.loads(arena("export", "one-cpu", "--store", "s.db", "--format", "json").stdout)
    assert {(r["environment"]["server_cpus"], r["environment"]["load_cpus"], r["valid"]) for r in exported} == {("0", "0", 1)}
    with Store(tmp_path / "s.db", readonly=True) as s:
        assert json.loads(s.db.execute("SELECT definition FROM experiments").fetchone()[0])["layout"] == {"share": True}
    tuned = arena("tune", "--cpus", "0", "--p99-max", "100ms", "--servers", "gunicorn-gthread", "--budget", "1s")
    assert "--share-cpus" in tuned.stderr and tuned.returncode == 2


@pytest.mark.integration
def test_arena_load_on_the_servers_cpu_is_refused_unless_shared(tmp_path):
    from arena.servers.launch import ServerSpec, start

    require_server("gunicorn-gthread")
    with start(ServerSpec("gunicorn-gthread", "wsgi", threads=2, cpus=[1])) as server:
        def load(*flags):
            return subprocess.run([*ARENA, "load", f"{server.url}/work?cpu_ms=1", "-c", "1", "-d", "1s", *flags],
                                  capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "400"})

        refused = load("--cpus", "1")
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.startswith("arena: error: --cpus 1: the server at ") and "--share-cpus" in refused.stderr
        shared = load("--cpus", "1", "--share-cpus")
        assert shared.returncode == 0 and f"{SHARED} (the generator and the server shared CPU(s) 1)" in shared.stdout
        apart = load("--cpus", "0")
        assert apart.returncode == 0 and SHARED not in apart.stdout
