"""Sharded sweeps: a plan's shares (plan/shard.py) are disjoint and whole, and the shards' stores
merged (app/merge.py) hold the unsharded plan's cells exactly once, with the fakes for the machine."""

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arena.app.analysis import analyses
from arena.app.run import plan_file, run_file
from arena.app.merge import merge
from arena.errors import ArenaError
from arena.plan.experiment import Group, ServerConfig
from arena.plan.shard import Shard, parse, shares
from arena.results.aggregate import aggregate
from arena.results.store import Store
from test_runner_seams import Machine, experiment_file


def test_a_shard_is_given_as_i_of_n_or_read_from_the_job_array():
    assert parse("2/4", {}) == Shard(2, 4)
    assert parse("auto/3", {"JOB_COMPLETION_INDEX": "0"}) == Shard(1, 3)  # Kubernetes: 0-based
    slurm = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert parse("auto", slurm) == Shard(3, 4)
    for bad, why in (("5/4", "the index must be from 1 to 4"), ("0/4", "the index must be from 1 to 4"),
                     ("2", "must be i/N"), ("auto", "neither JOB_COMPLETION_INDEX"), ("1/0", "must have 1 to")):
        with pytest.raises(ValueError, match=why):
            parse(bad, {})
    with pytest.raises(ValueError, match="JOB_COMPLETION_INDEX='x' is not a whole number"):
        parse("auto/2", {"JOB_COMPLETION_INDEX": "x"})


def test_shares_are_disjoint_whole_in_plan_order_and_balanced_by_time():
    groups = [Group(ServerConfig("puma", "rack", threads=t), 1, ()) for t in range(1, 11)]
    cost = {g: float(i % 4 + 1) for i, g in enumerate(groups)}  # 1, 2, 3, 4, 1, 2, ...
    parts = shares(groups, 3, cost.__getitem__)
    assert sorted((g for p in parts for g in p), key=groups.index) == groups  # each group once
    assert all(p == sorted(p, key=groups.index) for p in parts)  # the plan's (shuffled) order kept
    loads = [sum(cost[g] for g in p) for p in parts]
    assert max(loads) - min(loads) <= max(cost.values())  # longest first to the least loaded
    assert shares(groups, 3, cost.__getitem__) == parts  # the same on every job


def test_the_shards_dry_runs_are_disjoint_and_together_the_whole_plan(tmp_path):
    f = experiment_file(tmp_path, "1, 4")
    whole = {r.key for g in plan_file(str(f)).groups for r in g.runs}
    shards = [{r.key for g in plan_file(str(f), Shard(i, 3)).groups for r in g.runs} for i in (1, 2, 3)]
    assert set().union(*shards) == whole and sum(map(len, shards)) == len(whole)


def _sharded(tmp_path):
    f = experiment_file(tmp_path, "1, 4")
    for i in (1, 2):
        run_file(str(f), str(tmp_path / f"shard-{i}.db"), seams=Machine().seams(), shard=Shard(i, 2))
    run_file(str(f), str(tmp_path / "whole.db"), seams=Machine().seams())
    return f


def cells(db):
    with Store(db) as store:
        runs = store.runs("fake")
    return sorted((c.config, c.workload, c.model, c.level, c.total) for c in aggregate(runs))


def test_merged_shards_hold_every_cell_of_the_unsharded_plan_once_and_merge_again_adds_nothing(tmp_path):
    f = _sharded(tmp_path)
    shards = [str(tmp_path / "shard-1.db"), str(tmp_path / "shard-2.db")]
    m = merge(shards, str(tmp_path / "merged.db"))
    assert (m.added, m.replaced, m.kept, m.apart) == (8, 0, 0, [])
    assert cells(tmp_path / "merged.db") == cells(tmp_path / "whole.db")  # cell for cell, 2 repetitions each
    again = merge(shards, str(tmp_path / "merged.db"))
    assert (again.added, again.replaced, again.kept) == (0, 0, 8)
    # shard 1 run again (a job retried): its runs replace the earlier ones, never add to them
    run_file(str(f), str(tmp_path / "retry-1.db"), seams=Machine().seams(), shard=Shard(1, 2))
    retried = merge([str(tmp_path / "retry-1.db")], str(tmp_path / "merged.db"))
    assert retried.replaced == 4 and retried.added == 0
    assert cells(tmp_path / "merged.db") == cells(tmp_path / "whole.db")
    (a,) = analyses(str(tmp_path / "merged.db"), "fake")
    assert {r.environment.host for r in a.results.runs} != {None}  # each run says where it ran


def test_a_shard_of_another_experiment_is_refused_in_one_line(tmp_path):
    _sharded(tmp_path)
    (tmp_path / "other").mkdir()
    other = experiment_file(tmp_path / "other", "1, 8")  # the same name, other levels
    run_file(str(other), str(tmp_path / "other.db"), seams=Machine().seams(), shard=Shard(2, 2))
    with pytest.raises(ArenaError, match=r"other\.db: experiment fake is not the one in .*shard-1\.db \(another "
                                         r"definition"):
        merge([str(tmp_path / "shard-1.db"), str(tmp_path / "other.db")], str(tmp_path / "merged.db"))
    assert not (tmp_path / "merged.db").exists()  # refused before anything is written


def test_runs_from_another_cpu_model_are_kept_apart_with_a_warning(tmp_path):
    _sharded(tmp_path)
    with sqlite3.connect(tmp_path / "shard-2.db") as db:
        for rid, env in db.execute("SELECT id, environment FROM runs").fetchall():
            env = {**json.loads(env), "cpu_model": "Other CPU @ 1.0GHz", "host": "node7"}
            db.execute("UPDATE runs SET environment = ? WHERE id = ?", (json.dumps(env), rid))
    m = merge([str(tmp_path / "shard-1.db"), str(tmp_path / "shard-2.db")], str(tmp_path / "merged.db"))
    assert m.experiments == ["fake", "fake@node7"]
    assert len(m.apart) == 1 and "ran on node7 (Other CPU @ 1.0GHz)" in m.apart[0]
    with Store(tmp_path / "merged.db") as store:
        assert len(store.runs("fake")) == 4 and len(store.runs("fake@node7")) == 4


# ---------------------------------------------------------------------- the job arrays shipped in deploy/

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def _shard_flag(command: str) -> str:
    return re.search(r"--shard (\S+)", command).group(1)


def test_the_kubernetes_indexed_job_runs_every_share_once_then_merges_them(tmp_path):
    """deploy/kubernetes: an Indexed Job whose N pods take shards auto/N from JOB_COMPLETION_INDEX (each
    pod's plan, dry-run here, disjoint and together the whole plan), into stores the merge Job reads."""
    (shards,) = yaml.safe_load_all((DEPLOY / "kubernetes" / "arena-shards.yaml").read_text())
    (merge_job,) = yaml.safe_load_all((DEPLOY / "kubernetes" / "arena-merge.yaml").read_text())
    for job in (shards, merge_job):
        assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    spec = shards["spec"]
    n = spec["completions"]
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] == n
    (container,) = spec["template"]["spec"]["containers"]
    command = " ".join(container["args"])
    assert _shard_flag(command) == f"auto/{n}" and "--store /results/shard-$(JOB_COMPLETION_INDEX).db" in command
    assert container["resources"]["requests"] == container["resources"]["limits"]  # whole CPUs of its own
    (merging,) = merge_job["spec"]["template"]["spec"]["containers"]
    assert " ".join(merging["args"]).startswith("arena merge /results/shard-*.db -o ")
    claims = {v["persistentVolumeClaim"]["claimName"] for job in (shards, merge_job)
              for v in job["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v}
    assert len(claims) == 1  # the shards write where the merge reads
    f = experiment_file(tmp_path, "1, 4")
    plans = [{r.key for g in plan_file(str(f), parse(_shard_flag(command), {"JOB_COMPLETION_INDEX": str(i)})).groups
              for r in g.runs} for i in range(n)]
    whole = {r.key for g in plan_file(str(f)).groups for r in g.runs}
    assert set().union(*plans) == whole and sum(map(len, plans)) == len(whole)


KUBECTL = """#!/bin/bash
echo "$*" >> "$KUBECTL_LOG"
if [ "$1" = get ]; then
    n=$(grep -c '^get ' "$KUBECTL_LOG")
    [ "$n" -ge 3 ] && echo "$ENDED"
fi
true
"""


@pytest.mark.parametrize("ended", ["SuccessCriteriaMet Complete", "FailureTarget Failed"])
def test_the_kubernetes_merge_is_applied_once_the_shards_job_has_ended_complete_or_failed(tmp_path, ended):
    """deploy/kubernetes/submit, against a stand-in kubectl whose Job ends at its third query: the
    shards first, then the Job's state asked until it has ended, then the merge; a failed Job's
    stores are merged too (its shards' runs are stored all the same)."""
    (tmp_path / "kubectl").write_text(KUBECTL)
    (tmp_path / "kubectl").chmod(0o755)
    log = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "KUBECTL_LOG": str(log), "ENDED": ended,
           "POLL_S": "0"}
    r = subprocess.run([str(DEPLOY / "kubernetes" / "submit")], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    here = DEPLOY / "kubernetes"
    query = "get job arena-shards -o jsonpath={.status.conditions[?(@.status==\"True\")].type}"
    assert log.read_text().splitlines() == [f"apply -f {here}/arena-shards.yaml", query, query, query,
                                            f"apply -f {here}/arena-merge.yaml"]
    assert f"job/arena-shards: {ended}" in r.stderr


def test_the_kubernetes_manifests_keep_to_kubernetes_own_schemas():
    """Every object in deploy/kubernetes against the Kubernetes API's JSON schemas (kubernetes-validate
    ships them: no cluster, no download), strict: an unknown or misspelt field is an error too."""
    import kubernetes_validate
    from kubernetes_validate.utils import latest_version

    docs = [(path.name, doc) for path in sorted((DEPLOY / "kubernetes").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert docs
    for name, doc in docs:
        kubernetes_validate.validate(doc, latest_version(), strict=True)  # raises ValidationError
    broken = dict(docs[0][1], spec=dict(docs[0][1]["spec"], completionz=2))
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, latest_version(), strict=True)


def test_the_slurm_array_runs_every_share_once_and_queues_the_merge_after_it(tmp_path):
    for script in ("arena-shards.sbatch", "arena-merge.sbatch", "submit"):
        ok = subprocess.run(["bash", "-n", str(DEPLOY / "slurm" / script)], capture_output=True, text=True)
        assert ok.returncode == 0, ok.stderr
    text = (DEPLOY / "slurm" / "arena-shards.sbatch").read_text()
    lo, hi = map(int, re.search(r"#SBATCH --array=(\d+)-(\d+)", text).group(1, 2))
    assert _shard_flag(text) == "auto" and '--store "$RESULTS/shard-$SLURM_ARRAY_TASK_ID.db"' in text
    assert 'arena merge "$RESULTS"/shard-*.db' in (DEPLOY / "slurm" / "arena-merge.sbatch").read_text()
    assert "--dependency=\"afterany:" in (DEPLOY / "slurm" / "submit").read_text()
    got = [parse("auto", {"SLURM_ARRAY_TASK_ID": str(t), "SLURM_ARRAY_TASK_MIN": str(lo),
                          "SLURM_ARRAY_TASK_COUNT": str(hi - lo + 1)}) for t in range(lo, hi + 1)]
    assert got == [Shard(i, hi - lo + 1) for i in range(1, hi - lo + 2)]


@pytest.mark.integration
def test_a_slurm_array_job_runs_the_shards_and_merges_them_for_real(tmp_path):
    """deploy/slurm/submit on a single-node Slurm of the test's own (tests/slurm.py): two shard tasks
    run the real experiment, the merge job after them; the merged store has every cell once."""
    import slurm

    why = slurm.missing()
    if why:
        print(f"skipped: no Slurm here: {why}")
        pytest.skip(f"no Slurm here: {why}")
    exp = tmp_path / "slurmed.toml"
    exp.write_text("""name = "slurmed"
duration = "1s"
warmup = "0.5s"
repetitions = 1
[workload]
path = "/work?cpu_ms=1&io_ms=2"
[load]
concurrency = [1, 4]
[[servers]]
server = "gunicorn-gthread"
app = "wsgi"
threads = [1, 2]
[layout]
server_cpus = "1"
load_cpus = "0"
""")
    results = tmp_path / "results"
    cluster = slurm.Slurm(tmp_path / "slurm")
    try:
        cluster.start(cpus=os.cpu_count() or 1)
        env = {**cluster.env, "EXPERIMENT": str(exp), "RESULTS": str(results), "SHARDS": "2",
               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        submitted = subprocess.run(["bash", str(DEPLOY / "slurm" / "submit")], capture_output=True, text=True,
                                   timeout=60, env=env, cwd=tmp_path)
        assert submitted.returncode == 0, submitted.stderr
        assert cluster.wait_idle(300), cluster.run(["squeue"]).stdout
    finally:
        cluster.close()
    logs = {f.name: f.read_text() for f in tmp_path.glob("arena-*.log")}
    assert set(logs) == {"arena-shard-1.log", "arena-shard-2.log", "arena-merge.log"}, logs
    assert (results / "experiment.db").exists(), logs
    with Store(str(results / "experiment.db")) as store:
        runs = store.runs("slurmed")
    keys = sorted(r.run_key for r in runs)
    assert len(keys) == 4 and len(set(keys)) == 4, keys  # 2 configurations x 2 levels, each once
    assert {r.environment.host for r in runs} != {None}
