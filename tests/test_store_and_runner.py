"""The store (schema versions, migrations, refusals) and the runner (validity rules; a short real
sweep that is interrupted and resumed)."""

import dataclasses
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from arena.results import store as store_mod
from arena.results.load_result import Histogram, LoadFigures, LoadResult, Phase, SeriesPoint, to_dict
from arena.errors import ArenaError
from arena.drivers.spec import LoadSpec
from arena.results.validity import RULES, method, throughput_drift, validity_flags
from arena.results.store import SCHEMA_VERSION, Store
from tests.conftest import require_server


def run_row(key: str, **over) -> dict:
    base = {c: None for c in store_mod.RUN_COLUMNS}
    base.update(run_key=key, config="puma[rack] t=5", label="puma[rack] t=5", server="puma", app="rack",
                workload="default", model="closed",
                level=4, repetition=1, driver="arena-load", started_at=time.time(), server_reused=0, valid=1,
                flags=[], throughput=100.0, load={}, resources={}, environment={}, services={})
    base.update(over)
    return base


def test_a_new_store_is_created_at_the_current_version(tmp_path):
    with Store(tmp_path / "a.db") as s:
        assert s.version == SCHEMA_VERSION
        eid = s.experiment_id("e", "e.toml", {"name": "e"})
        s.save_run(eid, run_row("k1"))
        assert s.done_keys(eid) == {"k1": True}
    with Store(tmp_path / "a.db") as s:  # reopening migrates nothing and keeps everything
        assert [r.run_key for r in s.runs("e")] == ["k1"]


def test_an_old_store_is_upgraded_step_by_step(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    with Store(path):
        pass
    # a later Arena adds a migration: the store is upgraded, its data kept
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS + ["ALTER TABLE runs ADD COLUMN note TEXT"])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with Store(path) as s:
        assert s.version == SCHEMA_VERSION + 1
        assert "note" in [c[1] for c in s.db.execute("PRAGMA table_info(runs)")]


def test_a_version_1_store_gains_workloads_and_keeps_its_runs(tmp_path, monkeypatch):
    path = tmp_path / "v1.db"
    v1_columns = tuple(c for c in store_mod.RUN_COLUMNS if c not in ("workload", "services", "pool", "db_connections",
                                                                       "db_max_connections", "db_refused", "db_refused_first",
                                                                       "speed_ms", "launch", "topology", "others_cores",
                                                                       "why", "flag_kinds"))
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:1])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", 1)
    monkeypatch.setattr(store_mod, "RUN_COLUMNS", v1_columns)
    with Store(path) as s:  # as the first Arena wrote it
        eid = s.experiment_id("e", "e.toml", {})
        row = run_row("old run")
        del row["workload"], row["services"]
        s.save_run(eid, row)
        assert s.version == 1
    monkeypatch.undo()
    with Store(path) as s:
        assert s.version == SCHEMA_VERSION >= 2
        (old,) = s.runs("e")
        assert (old.run_key, old.workload, old.throughput) == ("old run", "default", 100.0)


def test_a_store_from_before_the_spread_gains_it_among_its_figures_and_keepalive_reads_only_those(tmp_path):
    """Schema 16: a run stored with its kept-alive connections' spread in its load result but not in
    its figures (as schema 15 kept them) gains it there on upgrade, and the keep-alive detector finds
    Puma's unfairness in runs read without any load result (show's read: the figures alone)."""
    from tests.conftest import report_store
    from arena.results.aggregate import aggregate
    from arena.results.load_result import ConnectionSpread
    from arena.results.why import keepalive

    import shutil

    path = tmp_path / "s.db"
    shutil.copy(report_store(), path)
    spread = ConnectionSpread(269, 6_684_671.0, 49_151.0, 1.0, 9.0)
    with Store(path) as s:
        (one, *_) = s.runs("tiny-grid", "whole")
        eid = s.experiment_id("e", "e.toml", {})
        for k in range(3):
            s.save_run(eid, run_row(f"r{k}", load=to_dict(dataclasses.replace(one.load, connection_spread=spread))))
        old = {k: v for k, v in json.loads(s.db.execute("SELECT figures FROM runs WHERE run_key = 'r0'").fetchone()[0]).items()
               if k != "connection_spread"}
        s.db.execute("UPDATE runs SET figures = ? WHERE experiment_id = ?", (json.dumps(old), eid))
        s.db.execute("PRAGMA user_version = 15")
        s.db.commit()
    with Store(path) as s:
        assert s.version == SCHEMA_VERSION == 16
        bare = s.runs("e", "none")
    assert all(r.load is None and r.figures.connection_spread == spread for r in bare)
    (cell,) = aggregate(bare)
    found = keepalive.detect(cell, [cell])
    assert found is not None and found.effect_p99_ms == pytest.approx((6_684_671 - 49_151) / 1000)


def test_a_run_is_read_from_its_summary_and_whole_only_when_asked(tmp_path):
    """An older store (the report fixture: schema 2, arena-load's own documents kept) gains each run's
    summary on upgrade; reading it gives the same figures as the whole document, without what only the
    exports read."""
    import dataclasses
    import shutil

    from tests.conftest import report_store

    path = tmp_path / "old.db"
    shutil.copy(report_store(), path)
    with Store(path) as s:
        lean, whole, bare = s.runs("tiny-grid"), s.runs("tiny-grid", "whole"), s.runs("tiny-grid", "none")
        sizes = s.db.execute("SELECT SUM(LENGTH(summary)), SUM(LENGTH(load)) FROM runs").fetchone()
    assert len(lean) == len(whole) == 32
    assert all(callable(r.stored_load) for r in lean)  # decoded only where read
    assert all(w.load.raw and w.load.warmup for w in whole)
    assert not any(r.load.raw or r.load.warmup or any(p.hdr for p in r.load.series) for r in lean)
    for r, w in zip(lean, whole):
        assert r.load.measured == w.load.measured and r.load.series == [dataclasses.replace(p, hdr=None) for p in
                                                                       w.load.series]
        assert r == w and r.figures == LoadFigures.of(w.load)  # the columns, and the figures its cell reads
    assert not any(callable(r.stored_load) for r in lean)  # each decoded once, then kept
    assert sizes[0] < sizes[1] / 2
    assert lean == bare and all(b.load is None and b.figures for b in bare)  # the stored columns, no load read
    with Store(path) as s:  # a run stored now carries its summary too
        eid = s.experiment_id("e", "e.toml", {})
        s.save_run(eid, run_row("new", load=to_dict(whole[0].load)))
        (new,) = s.runs("e")
    assert new.load.raw is None and new.load.measured == whole[0].load.measured


def test_stored_documents_parse_as_json_writes_them():
    """The store's fast parser gives what json gives, NaN and Infinity included (json writes them,
    orjson does not read them)."""
    doc = {"mean": 1.5e-7, "big": 2 ** 62, "hdr": "HISTFAAA", "none": None, "nested": [{"é": True}]}
    assert store_mod._loads(json.dumps(doc)) == doc
    odd = store_mod._loads(json.dumps({"stdev": float("nan"), "max": float("inf")}))
    assert math.isnan(odd["stdev"]) and odd["max"] == math.inf


def test_reading_runs_leaves_the_collector_as_it_was_and_its_runs_frozen(tmp_path):
    """Store.runs pauses Python's cyclic collector while it decodes and leaves the runs it made out
    of later collections (gc.freeze); the collector is on again after, or still off where it was."""
    import gc
    import shutil

    from tests.conftest import report_store

    path = tmp_path / "s.db"
    shutil.copy(report_store(), path)
    gc.unfreeze()
    try:
        with Store(path) as s:
            before = gc.get_freeze_count()
            assert len(s.runs("tiny-grid")) == 32
            assert gc.isenabled() and gc.get_freeze_count() > before
            gc.disable()
            s.runs("tiny-grid")
            assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_newer_or_foreign_store_is_refused(tmp_path):
    newer = tmp_path / "newer.db"
    db = sqlite3.connect(newer)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    db.close()
    with pytest.raises(ArenaError, match=rf"schema version {SCHEMA_VERSION + 5} is newer than this Arena's"):
        Store(newer)
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite at all, just text " * 100)
    with pytest.raises(ArenaError, match="not an Arena store"):
        Store(junk)


def test_an_sqlite_file_of_something_else_is_refused_and_left_untouched(tmp_path):
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE notes (t TEXT)")
    db.commit()
    db.close()
    before = other.read_bytes()
    with pytest.raises(ArenaError, match=r"not an Arena store \(an SQLite file with other tables: notes\)"):
        Store(other)
    assert other.read_bytes() == before  # no table added


def test_a_changed_definition_under_the_same_name_is_refused(tmp_path):
    with Store(tmp_path / "s.db") as s:
        s.experiment_id("e", "e.toml", {"duration": "5s"})
        with pytest.raises(ArenaError, match='e.toml: name = "e": the store .* holds an experiment of that name'):
            s.experiment_id("e", "e.toml", {"duration": "6s"})
        with pytest.raises(ArenaError, match="no experiment named 'nope'"):
            s.runs("nope")


def result(completed=1000, errors=0, saturated=False, series=(100,) * 10, duration=10.0) -> LoadResult:
    h = Histogram(completed, 1, 10, 5.0, 1.0, {"50": 5, "99": 9})
    phase = Phase(duration, completed, completed, completed, errors, 0, 0, 100.0, 100.0, {200: completed}, {},
                  {}, 0, 0, h, h, h, h)
    points = [SeriesPoint(float(i), n, n, 0, 5, 8, 9, 10) for i, n in enumerate(series)]
    return LoadResult("arena-load", "0", "closed", "u", 4, None, False, phase, None, points, 1.0, 0.1, 1.0, None,
                      saturated, ["generator CPU 95% busy"] if saturated else [], {"interval_s": 1.0})


def flags(r, **kw):
    args = dict(error_threshold=0.01, drift_threshold=0.25, server_died=False, processes_lost=None)
    args.update(kw)
    return validity_flags(r, **args)


def test_validity_rules():
    assert flags(result()) == []
    assert flags(result(), slowdown=0.29, speed_threshold=0.3) == []
    assert flags(result(), slowdown=0.5, speed_threshold=0.3) == [
        "the machine ran 50% slower than usual in this experiment in every check before, during and after the run "
        "(speed check; threshold 30%): a spell of a slower machine"]
    assert flags(result(), others_share=0.04) == []
    assert flags(result(), others_share=0.28) == [
        "other processes took 28% of the run's CPUs during it (at most 5%): a neighbour shared the server's CPUs"]
    assert flags(result(), others_share=0.28, others_threshold=0.3) == []  # the experiment's others_threshold
    assert flags(result(), others_share=0.04, others_threshold=0.03) == [
        "other processes took 4% of the run's CPUs during it (at most 3%): a neighbour shared the server's CPUs"]
    assert flags(result(saturated=True)) == ["generator saturated: generator CPU 95% busy"]
    assert flags(result(completed=980, errors=20)) == ["errors 2.0% of requests (threshold 1.0%)"]
    assert flags(result(completed=995, errors=5)) == []
    # a run bounded by a request count whose tool was stopped at its time limit before answering them all
    assert flags(result(), requests=1000) == []
    assert flags(result(completed=66), requests=200) == ["answered 66 of the 200 requests before the time limit"]
    assert flags(result(series=(100,) * 5 + (50,) * 5)) == ["throughput drifted 50% between the run's halves (threshold 25%)"]
    assert flags(result(), server_died=True) == ["the server died during the run"]
    assert flags(result(), processes_lost=(1, 3)) == ["1 of the server's 3 processes exited during the run "
                                                      "(a worker died or was replaced)"]


def test_each_flag_names_its_own_cause():
    made = [flags(result(), slowdown=0.5, speed_threshold=0.3), flags(result(), others_share=0.28),
            flags(result(saturated=True)), flags(result(completed=980, errors=20)),
            flags(result(completed=66), requests=200), flags(result(series=(100,) * 5 + (50,) * 5)),
            flags(result(), server_died=True), flags(result(), processes_lost=(1, 3))]
    assert [f.kind for (f,) in made] == [
        "a slower machine", "a neighbour shared the CPUs", "generator saturated", "errors", "the time limit",
        "throughput drifted", "the server died", "a server process exited"]
    # the first flag of runs that answered nothing right, or stalled: each its own cause, not "errors"
    assert [flags(r)[0].kind for r in (result(completed=0, errors=0), result(completed=0, errors=50),
                                        result(series=(100, 100, 100, 100, 0, 100, 100, 100, 100, 100)))] == [
        "no answer", "no request succeeded", "a stall"]
    # a load host's problem, connections never opened, requests due never sent: each its own cause
    r = result()
    assert [flags(x)[0].kind for x in (
        dataclasses.replace(r, hosts=[{"name": "h2", "problem": "its clock is 40 ms off"}]),
        dataclasses.replace(r, open_failure="opened 60 of 64"),
        dataclasses.replace(r, measured=dataclasses.replace(r.measured, sent=900, unsent=100)))] == [
        "a load host's problem", "connections not opened", "requests never sent"]
    # every kind is a rule's, once
    assert len({rule.kind for rule in RULES}) == len(RULES) == 15


def test_an_oom_kill_is_the_first_cause_named_with_its_limit_and_peak():
    from arena.results.validity import OutOfMemory

    killed = OutOfMemory(kills=1, processes=3, lost=(4052,), started=1, limit_mib=120, peak_bytes=125829120)
    got = flags(result(completed=980, errors=20), processes_lost=(1, 3), oom=killed)
    assert got[0] == ("out of memory: the kernel killed 1 process of the server at its 120MiB limit (peak 120.0 MiB); "
                      "of the 3 it began with, pid 4052 is gone; it started 1 in its place")
    assert [f.kind for f in got] == ["out of memory", "a server process exited", "errors"]  # the cause first
    two = OutOfMemory(kills=3, processes=5, lost=(7, 9), started=0, limit_mib=1536, peak_bytes=None)
    assert flags(result(), oom=two) == ["out of memory: the kernel killed 3 processes of the server at its 1.5GiB "
                                        "limit; of the 5 it began with, pid 7, 9 are gone"]
    assert flags(result(), oom=OutOfMemory(0, 3, (), 0, 120, 1)) == []


def test_the_method_states_every_rule_with_the_experiments_thresholds():
    text = method({"error_threshold": 0.05, "drift_threshold": 0.25, "others_threshold": 1, "speed_threshold": 10})
    assert text.startswith("A run is invalid when the kernel's OOM killer ended one of the server's processes at its "
                           "memory limit ([[servers]] memory_limit); or no request was answered at all; or no request "
                           "succeeded; or ")
    assert "passed error_threshold (5%) of the requests answered" in text
    assert "more than others_threshold (100%) of the run's CPUs" in text and "speed_threshold (1000%)" in text
    assert "its loop did not run for over 100 ms" in text and "more than 1% of the requests" in text
    assert text.count("; or ") == len(RULES) - 1


def test_flags_keep_their_kinds_in_the_store_and_older_ones_gain_them(tmp_path, monkeypatch):
    """A run's flags come back with their kinds; a store from before kinds were stored (schema 13)
    gains them from its flags' wording, and a wording of no rule is its own kind."""
    import pickle

    errors, neighbour = flags(result(completed=980, errors=20), others_share=0.28)
    assert pickle.loads(pickle.dumps(errors)).kind == "errors" == errors.kind
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:13])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", 13)
    monkeypatch.setattr(store_mod, "RUN_COLUMNS", tuple(c for c in store_mod.RUN_COLUMNS if c != "flag_kinds"))
    with Store(tmp_path / "v13.db") as s:
        eid = s.experiment_id("e", "e.toml", {})
        s.save_run(eid, run_row("old", valid=0, flags=[str(errors), "an older store's wording"]))
    monkeypatch.undo()
    with Store(tmp_path / "v13.db") as s:
        eid = s.experiment_id("e", "e.toml", {})
        s.save_run(eid, run_row("new", valid=0, flags=[neighbour], flag_kinds=[neighbour.kind]))
        old, new = s.runs("e")
    assert [(str(f), f.kind) for f in old.flags] == [(str(errors), "errors"),
                                                      ("an older store's wording", "an older store's wording")]
    assert [f.kind for f in new.flags] == ["a neighbour shared the CPUs"] and new.to_json()["flag_kinds"] == [
        "a neighbour shared the CPUs"]


def test_drift_uses_whole_intervals_only():
    # the 11th point starts at t=10: it is the drain after a 10 s window, not part of it
    assert throughput_drift(result(series=(100,) * 10 + (3,))) is None
    assert throughput_drift(result(series=(100,))) is None


def test_drift_must_be_beyond_counting_noise():
    # 45 vs 31 completions a half: 31% apart, but |a - b| = 14 < 3 sqrt(76) = 26: noise, not drift
    assert throughput_drift(result(series=(9,) * 5 + (6, 7, 6, 6, 6))) is None
    # the same 31% at 100x the counts is far beyond noise
    assert throughput_drift(result(series=(900,) * 5 + (620,) * 5)) == pytest.approx(280 / 900)



def test_the_answers_a_windows_lead_in_lacks_are_not_drift():
    """32 clients queued 640 ms behind one gunicorn sync worker (examples/why/backlog.toml's control,
    as measured): its window's first second counted 16 answers and the next two 49 each, the first
    answers to its own requests coming 660 ms in (the median). Little's law gives the 32 back (48.7
    req/s x 660 ms): no drift. A first half short by more is drift; the lead-in never lifts a half past the
    other, and without a response time there is none."""
    from dataclasses import replace

    from arena.results.validity import lead_in

    h = Histogram(146, 20_000, 700_000, 657_699.0, 1.0, {"50": 660_000, "99": 700_000})
    queued = result(completed=146, series=(16, 49, 49), duration=3.0)
    queued = replace(queued, measured=replace(queued.measured, achieved_rps=48.67, response_time=h))
    assert lead_in(queued, 1.0) == pytest.approx(32.1, abs=0.1)
    assert throughput_drift(queued) is None
    assert lead_in(queued, 0.5) == pytest.approx(48.67 * 0.5)  # at most what the time holds
    assert throughput_drift(replace(queued, measured=replace(queued.measured, response_time=None))) == \
        pytest.approx(33 / 49)

    def series(*counts):
        return replace(queued, series=[replace(p, completed=n) for p, n in zip(queued.series, counts)])

    assert throughput_drift(series(100, 300, 300)) == pytest.approx((300 - 132) / 300, abs=1e-3)  # 32 of 200
    assert throughput_drift(series(49, 49, 16)) == pytest.approx(33 / 49)  # a server slowing down gains nothing


def test_a_profiles_rise_and_fall_is_neither_drift_nor_a_stall_but_answers_falling_behind_it_are():
    """Sent at a log's times (arrival "schedule"), a run's completions follow its sends: a ramp
    from 50 to 400 a second and a silent second are the profile's; a second half answering half
    of what it sent is drift, and a second without answers while 300 were sent in it is a stall."""
    import dataclasses

    from arena.results.validity import stall

    def scheduled(sent, completed):
        r = result(series=completed, duration=float(len(completed)))
        points = [dataclasses.replace(p, sent=n) for p, n in zip(r.series, sent)]
        return dataclasses.replace(r, series=points, config={"arrival": "schedule", "interval_s": 1.0})

    ramp = (50, 100, 150, 200, 0, 300, 350, 400)
    assert scheduled(ramp, ramp).settings.arrival == "schedule"
    assert throughput_drift(scheduled(ramp, ramp)) is None and stall(scheduled(ramp, ramp)) is None
    assert throughput_drift(result(series=ramp, duration=8.0)) == pytest.approx(1 - 500 / 1050)  # as a rate: drift
    behind = ramp[:4] + tuple(n // 2 for n in ramp[4:])
    assert throughput_drift(scheduled(ramp, behind)) == pytest.approx(0.5, abs=0.01)
    frozen = ramp[:5] + (0,) + ramp[6:]
    assert stall(scheduled(ramp, frozen)).startswith("stalled: 0 completions in the interval at 5 s against 300 "
                                                     "sent in it")


# ---------------------------------------------------------------------- a real sweep

SWEEP = """
name = "tiny"
duration = "1s"
speed_threshold = 10  # not about the machine (test_runner_seams.py is): a spell must not fail it,
others_threshold = 1  # nor a neighbour
drift_threshold = 10  # nor the drift a neighbour makes
warmup = "200ms"
repetitions = 1
[workload]
path = "/work?cpu_ms=1&io_ms=1"
[load]
concurrency = [1, 2]
[[servers]]
server = "puma"
threads = 2
[[servers]]
server = "gunicorn-gthread"
processes = 2
threads = 2
[[servers]]
server = "uvicorn"
"""


def arena(*args, **kw):
    return subprocess.run([sys.executable, "-m", "arena", *args], capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.integration
def test_a_sweep_interrupted_then_resumed_finishes_only_what_was_missing(tmp_path):
    for s in ("puma", "gunicorn-gthread", "uvicorn"):
        require_server(s)
    exp, db = tmp_path / "tiny.toml", tmp_path / "arena.db"
    exp.write_text(SWEEP)
    proc = subprocess.Popen([sys.executable, "-m", "arena", "run", str(exp), "--store", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    # interrupt after the second finished run, as a terminal's Ctrl-C does (the whole group)
    seen = 0
    for line in proc.stdout:
        seen += bool(re.search(r"req/s +p99", line))
        if seen == 2:
            os.killpg(proc.pid, signal.SIGINT)
            break
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    with Store(db) as s:
        kept = [r.run_key for r in s.runs("tiny")]
    assert len(kept) >= 2, "every finished run is kept"
    assert len(kept) < 6

    again = arena("run", str(exp), "--store", str(db))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{6 - len(kept)} runs done (0 invalid), {len(kept)} already in the store" in again.stdout
    with Store(db) as s:
        runs = s.runs("tiny")
    assert len(runs) == 6 and len({r.run_key for r in runs}) == 6
    for r in runs:
        assert r.valid, r.flags
        assert r.throughput > 0 and r.p99_us > 0 and r.pss_bytes > 0 and r.cpu_s > 0
        env = r.environment
        assert env.cpus and env.kernel and env.server_cpus != env.load_cpus
    assert {r.server_reused for r in runs} == {0, 1}  # the second level reused the start of the first

    show = arena("show", "tiny", "--store", str(db))
    assert show.returncode == 0 and "puma[rack] t=2" in show.stdout and "c=2" in show.stdout
    listing = arena("ls", "--store", str(db))
    assert "tiny" in listing.stdout and " 6 " in listing.stdout
    csv_out = arena("export", "tiny", "--store", str(db), "--format", "csv")
    assert len(csv_out.stdout.strip().splitlines()) == 7  # header + one row per run
    exported = json.loads(arena("export", "tiny", "--store", str(db), "--format", "json").stdout)
    assert len(exported) == 6 and exported[0]["load"]["raw"]["schema"] == "arena-load-result"
    runs_out = arena("show", "tiny", "--store", str(db), "--runs")
    assert runs_out.stdout.count("Throughput:") == 6


def test_show_and_export_refuse_a_missing_store(tmp_path):
    r = arena("show", "--store", str(tmp_path / "none.db"))
    assert r.returncode == 2 and r.stderr.startswith("arena: error: --store ") and r.stderr.count("\n") == 1
    assert not Path(tmp_path / "none.db").exists()


@pytest.mark.integration
def test_the_same_study_with_ab_and_arena_load_lands_in_one_store(tmp_path):
    require_server("puma")
    db = tmp_path / "arena.db"
    for name, driver in (("by-arena-load", "arena-load"), ("by-ab", "ab")):
        exp = tmp_path / f"{name}.toml"
        exp.write_text(f'name = "{name}"\ndriver = "{driver}"\nduration = "1s"\nspeed_threshold = 10\nothers_threshold = 1\ndrift_threshold = 10\nwarmup = "300ms"\n'
                       'repetitions = 1\n[workload]\npath = "/work?cpu_ms=2"\n[load]\nconcurrency = [2]\n[[servers]]\nserver = "puma"\nthreads = 2\n')
        r = arena("run", str(exp), "--store", str(db))
        assert r.returncode == 0, r.stdout + r.stderr
    with Store(db) as s:
        (native_run,), (ab_run,) = s.runs("by-arena-load"), s.runs("by-ab")
    assert native_run.driver == "arena-load" and ab_run.driver == "ab"
    for run in (native_run, ab_run):
        assert run.valid and run.throughput > 100 and run.p99_us > 2000, (run.driver, run.flags)
    assert ab_run.load.tool == "ab" and ab_run.load.measured.server_timing == {}  # ab cannot see it
    show = arena("show", "by-ab", "--store", str(db), "--runs")
    assert "ab 2.3" in show.stdout and "Throughput:" in show.stdout


@pytest.mark.integration
def test_the_probe_covers_the_measured_window_not_the_drain():
    """Eight clients on one thread, 300 ms each: when the measured second ends seven answers are still
    queued, and arena-load waits for them. The server's CPU and memory are read over the measured
    second only, not over the drain."""
    from arena.plan.expand import plan
    from arena.plan.parse import parse_experiment
    from arena.runner import measure
    from arena.servers.launch import ServerSpec, start

    require_server("puma")
    exp = parse_experiment({"name": "drain", "duration": "1s", "warmup": "300ms", "repetitions": 1,
                            "workload": {"path": "/work?io_ms=300"}, "load": {"concurrency": [8]},
                            "servers": [{"server": "puma", "threads": 1}]}, "drain.toml")
    (group,) = plan(exp)
    with start(ServerSpec("puma", "rack", threads=1, cpus=list(exp.server_cpus))) as server:
        t0 = time.monotonic()
        resources = measure(exp, group.runs[0], server).resources
        took = time.monotonic() - t0
    assert took > 0.3 + 1.0 + 1.0  # the drain happened
    assert resources.window_s == pytest.approx(1.0, abs=0.15)


def test_a_stall_is_flagged_in_the_closed_model_beyond_counting_noise():
    from arena.results.validity import poisson_cdf, stall

    # a 3 s freeze in a 5 s closed run: three seconds without a completion while 4 users wait
    frozen = result(series=(160, 0, 0, 0, 160))
    assert stall(frozen).startswith("stalled: 0 completions in the interval at 1 s against a usual 160")
    assert any(f.startswith("stalled") for f in flags(frozen))
    # a slow workload's quiet second is counting noise, not a stall: 0 of a median of 3 happens
    assert stall(result(series=(3, 0, 4, 3, 2))) is None
    # steady, and a dip inside the noise
    assert stall(result(series=(100,) * 10)) is None and stall(result(series=(100, 100, 80, 100, 100))) is None
    # Poisson tails against known values: P(X <= 0 | 10) = e^-10; P(X <= 2 | 3) = 8.5 e^-3 (R: ppois)
    assert poisson_cdf(0, 10) == pytest.approx(math.exp(-10)) and poisson_cdf(2, 3) == pytest.approx(8.5 * math.exp(-3))
    assert poisson_cdf(5000, 5000) == pytest.approx(0.5, abs=0.01)



def test_a_heavy_tailed_workloads_bursts_are_not_stalls_but_a_stall_among_them_is():
    """Requests of heavy-tailed times complete in bursts: counts that spread far beyond Poisson's
    (the routing study's least-connections fleet at 56 req/s, as measured) are judged against their
    own spread; a steady run's dip of the same depth, and a freeze among bursts, are stalls."""
    from arena.results.validity import dispersion, stall

    bursty = (41, 29, 95, 57, 54, 55, 56, 56, 60, 47, 63, 55, 25, 57, 82)
    assert dispersion(list(bursty)) == pytest.approx(304.41 / 55.467, abs=0.01)  # variance over mean
    assert stall(result(series=bursty, duration=15.0)) is None
    steady = (56, 55, 57, 54, 58, 56, 55, 57, 56, 54, 57, 55, 25, 56, 57)
    assert stall(result(series=steady, duration=15.0)).startswith("stalled: 25 completions in the interval at 12 s")
    frozen = bursty[:12] + (0,) + bursty[13:]
    assert stall(result(series=frozen, duration=15.0)).startswith("stalled: 0 completions in the interval at 12 s")
    # a real freeze in a closed run at c=4, as measured: two halved seconds around an empty one
    assert stall(result(series=(842, 412, 0, 405, 797))).startswith("stalled: 0 completions in the interval at 2 s")
    assert dispersion([100] * 5) == 1.0 and dispersion([7]) == 1.0



def test_the_first_intervals_of_slow_answers_are_not_stalls():
    """Measured requests are sent from the window's start: with answers of about 0.8 s (slow clients
    behind Puma, as measured), the first interval holds a fifth of the usual count; a later one at
    that count is a stall."""
    import dataclasses

    from arena.results.validity import stall

    def slow(series):
        r = result(series=series, duration=11.0)
        h = dataclasses.replace(r.measured.response_time, percentiles={"50": 800_000, "99": 1_040_000})
        return dataclasses.replace(r, measured=dataclasses.replace(r.measured, response_time=h))

    assert stall(slow((4, 21, 21, 22, 20, 19, 21, 19, 20, 22, 20))) is None
    assert stall(slow((21, 21, 21, 22, 20, 4, 21, 19, 20, 22, 20))).startswith("stalled: 4 completions in the interval at 5 s")


def test_no_success_is_its_own_flag():
    assert "no request succeeded" in flags(result(completed=0, errors=50))


def test_the_first_cause_comes_first():
    import dataclasses

    # a closed port: nothing succeeded (refused), and the generator was busy reconnecting
    refused = result(completed=0, errors=5000, saturated=True)
    refused = dataclasses.replace(refused, measured=dataclasses.replace(refused.measured, error_counts={"refused": 5000}))
    found = flags(refused)
    assert found[0] == "no request succeeded: 5000 connections refused" and found[1].startswith("generator saturated")
    # a worker that died comes before the stall and the drift it caused
    stalled = flags(result(series=(100, 100, 100, 100, 0, 0, 100, 100, 100, 100)), processes_lost=(1, 3))
    assert stalled[0].startswith("1 of the server's 3 processes exited") and any(f.startswith("stalled") for f in stalled)


def test_a_generator_that_paused_is_its_own_cause_not_a_server_stall():
    import dataclasses

    gap = result(series=(100, 100, 100, 100, 0, 100, 100, 100, 100, 100))
    assert any(f.startswith("stalled") for f in flags(gap))
    paused = dataclasses.replace(gap, saturated=True, generator_paused_ms=1000.0,
                                 saturation_reasons=["the generator did not run for 1000 ms (it was stopped, or "
                                                     "starved of CPU)"])
    assert flags(paused) == ["generator saturated: the generator did not run for 1000 ms (it was stopped, or starved "
                             "of CPU)"]
    # the pause is judged by the limit the generator states (arena-load's pause_limit_ms), else its old 100 ms
    assert flags(dataclasses.replace(gap, generator_paused_ms=150.0)) == []
    assert any(f.startswith("stalled") for f in flags(dataclasses.replace(gap, generator_paused_ms=150.0,
                                                                          generator_pause_limit_ms=200.0)))


def test_an_open_run_that_could_not_send_its_schedule_is_invalid():
    import dataclasses

    r = result()
    at = lambda sent, unsent: dataclasses.replace(r, measured=dataclasses.replace(r.measured, sent=sent, unsent=unsent))
    assert flags(at(1000, 10)) == []  # 1% of those due: the p99 of the rest still holds
    (flag,) = flags(at(1000, 11))
    assert flag.startswith("11 of the 1011 requests due were never sent (1.1%; at most 1%)")


@pytest.mark.alone
def test_a_freeze_inside_a_closed_run_makes_it_invalid():
    """A real server frozen (its cgroup) for 2 s in the middle of a 5 s closed run at c=4: fewer
    than 1% errors and no drift between the halves (the stall spans both), yet the run is flagged."""
    from arena.drivers import native
    from arena.servers.launch import ServerSpec, start

    require_server("puma")
    with start(ServerSpec("puma", "rack", threads=4, cpus=[1])) as server:
        if server.procset.backend == "none":
            pytest.skip("freezing needs a cgroup")
        # the freeze timed from arena-load's own start (--start-at), not from its process's: its
        # start-up on a busy machine would shift the stall into one half and make it a drift
        begin = time.time() + 0.5
        timer = threading.Timer(begin + 1.5 - time.time(), server.procset.freeze)
        thaw = threading.Timer(begin + 3.5 - time.time(), server.procset.thaw)
        timer.start()
        thaw.start()
        try:
            result = native.run(LoadSpec(f"{server.url}/work?cpu_ms=1", connections=4, duration_s=5.0, timeout_s=30,
                                         start_at=begin), cpus=[0])
        finally:
            timer.join()
            thaw.join()
    assert result.measured.errors == 0 and throughput_drift(result) is None  # the older rules see nothing
    found = flags(result)
    assert any(f.startswith("stalled: ") for f in found), found


@pytest.mark.integration
def test_error_answers_make_an_invalid_run_and_a_failing_exit(tmp_path):
    """A workload whose every request is refused by the app (a 400: cpu_ms beyond the contract's
    bound) is stored invalid, and `arena run` and `arena load` exit 1."""
    require_server("puma")
    exp = tmp_path / "e.toml"
    exp.write_text('name = "bad-requests"\nduration = "1s"\nwarmup = "0s"\nrepetitions = 1\n'
                   '[workload]\npath = "/work?cpu_ms=999999"\n[load]\nconcurrency = [2]\n'
                   '[[servers]]\nserver = "puma"\nthreads = 2\n')
    r = arena("run", str(exp), "--store", str(tmp_path / "s.db"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 invalid" in r.stdout
    with Store(tmp_path / "s.db") as s:
        (run,) = s.runs("bad-requests")
    assert not run.valid and run.load.measured.completed == 0
    assert run.load.measured.error_counts["status"] > 10 and run.load.measured.status == {400: run.load.measured.errors}
    assert run.flags[0].startswith("no request succeeded: ") and "answers with an unexpected status" in run.flags[0]
    assert run.throughput == 0

    from arena.servers.launch import ServerSpec, start

    with start(ServerSpec("puma", "rack", threads=2, cpus=[1])) as server:
        bad = arena("load", f"{server.url}/work?cpu_ms=999999", "-c", "2", "-d", "1s", "--cpus", "0")
        ok = arena("load", f"{server.url}/nope", "-c", "2", "-d", "1s", "--cpus", "0", "--expect-status", "404")
    assert bad.returncode == 1 and "INVALID: " in bad.stdout and "no request succeeded" in bad.stdout
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_the_speed_reference_is_the_usual_check_and_a_run_needs_both_its_checks_slow():
    from arena.speed import MIN_REFERENCE, Reference

    ref = Reference()
    assert [ref.slowdown(2.0, 2.0) for _ in range(MIN_REFERENCE)] == [0.0] * MIN_REFERENCE  # no usual speed yet
    assert ref.slowdown(2.0, 3.0) == 0.0  # one slow check alone (a blip) is not a slow machine
    assert ref.slowdown(3.0, 2.8, 3.1, 2.9) == pytest.approx(0.4)  # all slow: the fastest, against the median
    assert ref.slowdown(1.0, 1.0) == pytest.approx(-0.5)  # faster than usual: never flagged
    assert Reference([4.0, 4.0, 4.0]).slowdown(2.0, 2.0) == pytest.approx(-0.5)


def test_the_speed_judgement_on_recorded_check_series():
    """Checks recorded on this machine (ms, before and after each run, 2 CPUs): idle, the fastest of
    120 checks was 1.36 and the slowest 1.87; the old rule (the slower of the two against the fastest
    ever) called 1.87 37% slow. A spell that slows the cores by half is caught by both checks."""
    from arena.speed import Reference

    idle = [(1.52, 1.68), (1.87, 1.36), (1.37, 1.46), (1.40, 1.36), (1.46, 2.09), (2.01, 1.52), (1.41, 1.47),
            (1.39, 1.86), (1.44, 1.38), (1.52, 1.49), (1.36, 1.87), (1.50, 1.41)]
    ref = Reference()
    assert max(ref.slowdown(b, a) for b, a in idle) < 0.3
    spell = [(2.3, 2.4), (2.2, 2.5)]
    assert all(ref.slowdown(b, a) > 0.3 for b, a in spell)


def test_others_on_the_runs_cpus_are_its_cpus_busy_time_less_arenas():
    from arena.speed import others_cores

    assert others_cores(2.01, 2.0, 2.0) == pytest.approx(0.005)  # the counters' 10 ms tick: nothing
    assert others_cores(2.01, 1.44, 2.0) == pytest.approx(0.285)  # a hog took 0.57 s of the server's core
    assert others_cores(1.99, 2.0, 2.0) == 0.0 and others_cores(1.0, 0.0, 0.0) == 0.0


def test_the_cpus_busy_time_is_their_processes_and_the_hypervisors_not_their_interrupts(monkeypatch):
    """The kernel counts interrupt time apart from any process and cgroup: during a run, the run's own
    packets. Counted as busy, it read as a neighbour's (speed.busy_s)."""
    from collections import namedtuple

    import psutil

    from arena.speed import busy_s

    times = namedtuple("scputimes", "user nice system idle iowait irq softirq steal")
    per = [times(10.0, 1.0, 2.0, 50.0, 3.0, 0.5, 4.0, 0.25), times(20.0, 0.0, 5.0, 40.0, 0.0, 0.0, 7.0, 1.0)]
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu: per)
    assert busy_s([0]) == pytest.approx(13.25)
    assert busy_s([0, 1]) == pytest.approx(13.25 + 26.0)
    assert busy_s([1, 5]) == pytest.approx(26.0)  # a CPU the machine has not is none


def test_the_speed_check_times_work_on_each_cpu_and_gives_the_thread_its_cpus_back():
    import os

    from arena.speed import check_ms

    own = os.sched_getaffinity(0)
    cpu = min(own)
    one = check_ms([cpu], trials=3)
    assert 0.05 < one < 1000 and os.sched_getaffinity(0) == own
    assert check_ms([], trials=1) > 0 and os.sched_getaffinity(0) == own  # no CPUs given: its own
