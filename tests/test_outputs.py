"""Every file Arena writes is whole or absent (arena.atomic): a SIGKILL halfway or a full disk leaves
the old file or nothing, for each writer (export json/csv/hlog, the hgrm directory, a merged store,
tune's files, the report's charts); and what a rescue file brings in is checked against the runs'
schema before anything is written, so an import never makes a store unreadable."""

import copy
import json
import os
import shutil
import signal
import stat
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.atomic import clear_stale, partial_name, replacing, staging, write_file
from arena.errors import ArenaError
from arena.results.runs import schema_problem
from arena.results.store import RESCUE_FORMAT, Store
from tests.conftest import report_store
from tests.test_faults import ARENA, arena, one_line

EXPERIMENT = "tiny-grid"


def test_a_file_replaces_the_old_one_whole_and_a_failure_leaves_the_old_one(tmp_path):
    target = tmp_path / "out.json"
    write_file(target, "old", "-o")
    with pytest.raises(RuntimeError):
        with replacing(target, "-o") as f:
            f.write("half of the new")
            raise RuntimeError("the writer failed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    write_file(target, b"new", "-o")
    assert target.read_bytes() == b"new"
    with pytest.raises(ArenaError, match=r"^-o .*: is a directory"):
        write_file(tmp_path, "x", "-o")
    with pytest.raises(ArenaError, match=r"^-o .*missing/x: its directory .* does not exist"):
        write_file(tmp_path / "missing" / "x", "x", "-o")


KILLED_WRITER = """
import sys, time
from arena.atomic import replacing
with replacing(sys.argv[1], "-o") as f:
    f.write("x" * 100000)
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def test_a_writer_killed_halfway_leaves_the_old_file_and_nothing_else(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old")
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "writing\n"  # mid-write: 100 kB written, not yet in place
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]  # an anonymous file: nothing left


def test_a_dead_writers_partial_files_are_cleared_by_the_next_writer_never_a_living_ones(tmp_path):
    target = tmp_path / "out.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = target.with_name(f".out.db.{dead.pid}.partial")
    left.write_text("half")
    left.with_name(left.name + "-journal").write_text("journal")
    living = partial_name(target).with_name(f".out.db.{os.getppid()}.partial")
    living.write_text("a living writer's")
    assert sorted(p.name for p in clear_stale(target)) == sorted([left.name, left.name + "-journal"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [living.name]


def test_a_staged_directory_moves_in_whole_or_leaves_the_old_files(tmp_path):
    out = tmp_path / "deploy"
    with staging(out, "--write") as stage:
        (stage / "run.sh").write_text("new")
        (stage / "puma.rb").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["puma.rb", "run.sh"]
    (out / "mine.txt").write_text("the user's")
    with pytest.raises(RuntimeError):
        with staging(out, "--write") as stage:
            (stage / "run.sh").write_text("newer")
            raise RuntimeError("failed halfway")
    assert (out / "run.sh").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deploy"]
    with staging(out, "--write") as stage:
        (stage / "run.sh").write_text("newer")
    assert (out / "run.sh").read_text() == "newer" and (out / "mine.txt").read_text() == "the user's"


def test_a_full_disk_leaves_no_export_file_nor_directory(tmpfs, tmp_path):
    store = tmp_path / "s.db"
    shutil.copy(report_store(), store)
    for fmt, name in (("json", "runs.json"), ("csv", "runs.csv"), ("hlog", "runs.hlog"), ("hgrm", "cells")):
        fs = os.statvfs(tmpfs)
        (tmpfs / "filler").write_bytes(b"x" * (fs.f_bavail * fs.f_frsize - 4096))  # a page left: each export is more
        out = tmpfs / name
        done = arena("export", EXPERIMENT, "--store", str(store), "--format", fmt, "-o", str(out), cwd=tmp_path)
        assert done.returncode == 2, (fmt, done.stdout, done.stderr)
        assert one_line(done.stderr) == f"arena: error: --output {out}: cannot write it (No space left on device)"
        assert sorted(p.name for p in tmpfs.iterdir()) == ["filler"], fmt  # nothing, not even a temporary file
        (tmpfs / "filler").unlink()


def _grown_store(path: Path, copies: int) -> int:
    """The report fixture's runs ``copies`` times over (run keys made distinct): a store big enough
    that merging it takes a while. Returns its runs."""
    shutil.copy(report_store(), path)
    Store(path).close()  # upgraded to this schema
    for backup in path.parent.glob(f"{path.name}.schema*.bak"):
        backup.unlink()
    with sqlite3.connect(path) as db:
        cols = [r[1] for r in db.execute("PRAGMA table_info(runs)") if r[1] not in ("id",)]
        rest = ", ".join(c for c in cols if c != "run_key")
        for n in range(1, copies):
            db.execute(f"INSERT INTO runs (run_key, {rest}) SELECT run_key || ' copy {n}', {rest} FROM runs "
                       "WHERE run_key NOT LIKE '% copy %'")
        return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def test_a_merge_killed_halfway_leaves_no_store_and_the_next_merge_makes_it_whole(tmp_path):
    shard = tmp_path / "shard.db"
    runs = _grown_store(shard, 40)
    out = tmp_path / "merged.db"
    proc = subprocess.Popen([*ARENA, "merge", str(shard), "-o", str(out)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    partial = tmp_path / f".merged.db.{proc.pid}.partial"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.exists() and partial.stat().st_size > 2_000_000:  # some runs in, not all (about 17 kB each)
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the merge ended before it could be killed: {proc.stderr.read()}"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert not out.exists()  # no store that looks whole with some of the runs
    done = arena("merge", str(shard), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{runs} run(s) added" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged.db", "shard.db"]  # the dead merge's copy cleared
    with Store(out, readonly=True) as s:
        assert len(s.runs(EXPERIMENT)) == runs


def test_a_merge_that_fills_the_disk_leaves_the_output_as_it_was(tmpfs, tmp_path):
    shard = tmp_path / "shard.db"
    shutil.copy(report_store(), shard)
    out = tmpfs / "merged.db"
    done = arena("merge", str(shard), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 3  # a store that could not be written (README: exit statuses)
    assert one_line(done.stderr) == f"arena: error: -o {out}: cannot write it (database or disk is full)"
    assert sorted(p.name for p in tmpfs.iterdir()) == []


def test_merge_names_its_output_flag_in_every_refusal(tmp_path):
    shard = tmp_path / "shard.db"
    shutil.copy(report_store(), shard)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE t (x)")
    text = tmp_path / "notes.txt"
    text.write_text("not a store")
    cases = {tmp_path: "is a directory", tmp_path / "missing" / "m.db": "does not exist",
             foreign: "not an Arena store", text: "not an Arena store"}
    for out, why in cases.items():
        done = arena("merge", str(shard), "-o", str(out), cwd=tmp_path)
        line = one_line(done.stderr)
        assert done.returncode == 2 and line.startswith(f"arena: error: -o {out}: ") and why in line, line
        assert "--store" not in line
    done = arena("merge", str(tmp_path / "nope.db"), "-o", str(tmp_path / "m.db"), cwd=tmp_path)
    assert one_line(done.stderr).startswith(f"arena: error: {tmp_path / 'nope.db'}: no such store")


def _rescue(tmp_path: Path) -> dict:
    with Store(report_store(), readonly=True) as s:
        runs = list(s.rows(EXPERIMENT))
        return {"format": RESCUE_FORMAT, "runs": runs[:4], "failures": [],
                "experiment": {"name": EXPERIMENT, "file": s.file(EXPERIMENT), "definition": s.definition(EXPERIMENT)}}


def _edited(doc: dict, how) -> dict:
    doc = copy.deepcopy(doc)
    how(doc)
    return doc


def test_the_store_writes_runs_that_its_own_schema_accepts():
    for fixture in (report_store(), str(Path(__file__).parent / "fixtures" / "reproduce" / "store.db")):
        with Store(fixture, readonly=True) as s:
            for e in s.experiments():
                runs, failures = list(s.rows(e["name"])), s.failure_rows(e["name"])
                doc = {"format": RESCUE_FORMAT, "runs": runs, "failures": failures,
                       "experiment": {"name": e["name"], "file": s.file(e["name"]), "definition": s.definition(e["name"])}}
                assert schema_problem(doc, "rescue") is None


def test_a_hand_edited_rescue_file_is_refused_in_one_line_and_the_store_still_reads(tmp_path):
    good = _rescue(tmp_path)
    store = tmp_path / "i.db"
    first = tmp_path / "first.json"
    first.write_text(json.dumps(_edited(good, lambda d: d.update(runs=d["runs"][:1]))))
    assert arena("import", str(first), "--store", str(store), cwd=tmp_path).returncode == 0
    key = good["runs"][2]["run_key"]
    cases = {
        "no experiment": (lambda d: d.pop("experiment"), "'experiment' is missing"),
        "no run key": (lambda d: d["runs"][1].pop("run_key"), "run 2: 'run_key' is missing"),
        "runs an object": (lambda d: d.update(runs={"a": 1}), 'runs: {"a": 1} is not of type \'array\''),
        "experiment a string": (lambda d: d.update(experiment="x"), 'experiment: "x" is not of type \'object\''),
        "throughput lots": (lambda d: d["runs"][2].update(throughput="lots"),
                            f"run 3 ({key}), throughput: \"lots\" is not of type 'number', 'null'"),
        "a histogram's count": (lambda d: d["runs"][2]["load"]["measured"]["response_time"].update(count="x"),
                                f"run 3 ({key}), load.measured.response_time.count: \"x\" is not of type 'integer'"),
    }
    for name, (how, said) in cases.items():
        bad = tmp_path / f"{name.replace(' ', '-')}.json"
        bad.write_text(json.dumps(_edited(good, how)))
        done = arena("import", str(bad), "--store", str(store), cwd=tmp_path)
        assert done.returncode == 2, (name, done.stdout)
        assert one_line(done.stderr) == f"arena: error: {bad}: {said}; nothing was brought in", name
    shown = arena("show", EXPERIMENT, "--store", str(store), cwd=tmp_path)
    assert shown.returncode in (0, 1) and "Traceback" not in shown.stderr, shown.stderr
    with Store(store, readonly=True) as s:
        assert len(s.runs(EXPERIMENT)) == 1


def test_a_full_disk_leaves_no_chart_export_and_no_tune_files(tmpfs, tmp_path):
    """The report's charts (--export DIR) and tune's files (--write DIR) are staged beside their
    directory and moved in whole: a full disk leaves neither the directory nor a staged copy."""
    from arena.servers import deploy
    from arena.subjects import APPS

    store = tmp_path / "s.db"
    shutil.copy(report_store(), store)
    fs = os.statvfs(tmpfs)
    (tmpfs / "filler").write_bytes(b"x" * (fs.f_bavail * fs.f_frsize - 8192))  # two pages left
    charts = tmpfs / "charts"
    done = arena("report", EXPERIMENT, "--store", str(store), "-o", str(tmp_path / "r.html"), "--export", str(charts),
                 cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_line(done.stderr).startswith(f"arena: error: --export {charts}: cannot write ")
    assert sorted(p.name for p in tmpfs.iterdir()) in (["filler"], ["charts", "filler"])  # made empty before the work
    assert not any(charts.iterdir()) if charts.exists() else True
    files = deploy.files(deploy.Deployment("puma", APPS["rack"], 2, 4), ["evidence " * 2000])  # 16 kB a file
    with pytest.raises(ArenaError, match=r"^--write .*/deploy: cannot write it \(No space left on device\)"):
        with staging(tmpfs / "deploy", "--write") as stage:
            for name, text in files.items():
                (stage / name).write_text(text)
    assert sorted(p.name for p in tmpfs.iterdir() if p.name != "charts") == ["filler"]


def test_a_stream_is_written_in_place_and_a_link_keeps_pointing_at_its_file(tmp_path):
    """/dev/stdout, a pipe or a terminal is not a file to replace (a rename over /dev/stdout would put a
    file in its place): it is written as a stream. A symbolic link's file is replaced, the link kept."""
    out = subprocess.run([sys.executable, "-c", "from arena.atomic import write_file; "
                                                "write_file('/dev/stdout', 'through the pipe', '--json')"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout == "through the pipe", out.stderr
    assert os.path.islink("/dev/stdout")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    write_file(fifo, "streamed", "-o")
    assert reader.communicate(timeout=10)[0] == "streamed" and stat.S_ISFIFO(os.stat(fifo).st_mode)
    real = tmp_path / "real.json"
    real.write_text("old")
    (tmp_path / "link.json").symlink_to(real)
    write_file(tmp_path / "link.json", "new", "-o")
    assert (tmp_path / "link.json").is_symlink() and real.read_text() == "new"
