"""Faults injected on purpose: a store that cannot be written (a full filesystem, a read-only one, a
missing directory, the store removed mid-run), stores that must not be written (read-only commands,
an older schema, an empty file). Each asserts what the README's exit statuses promise: one line, the
documented status, no measured run lost (a run the store could not take is kept in a file that
arena import brings in), nothing left running.

Filesystem faults use a small tmpfs of the test's own (mount needs root: skipped with the reason
elsewhere). Arena itself killed (SIGKILL) mid-run, and Ctrl-C or SIGTERM at any moment, are in
test_signals.py: the next command reaps what it left, nothing stored is lost."""

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.app.storage import import_rescued, open_store
from arena.errors import ArenaError, NotSaved
from arena.results.store import SCHEMA_VERSION, Store
from arena.runner import run_experiment
from arena.servers import cgroup
from tests.conftest import report_store, require_server
from tests.test_runner_seams import Machine, experiment

ARENA = [sys.executable, "-m", "arena"]
SMALL = """\
name = "faults"
duration = "1s"
warmup = "200ms"
repetitions = 3
speed_threshold = 10
others_threshold = 1
[load]
concurrency = [1, 2]
[[servers]]
server = "gunicorn-gthread"
threads = 2
"""


def arena(*argv, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([*ARENA, *argv], cwd=cwd, capture_output=True, text=True, timeout=300)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("arena: error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.integration
def test_a_filesystem_filling_during_arena_run_ends_in_one_line_and_keeps_every_run(tmpfs, tmp_path):
    require_server("gunicorn-gthread")
    (tmp_path / "faults.toml").write_text(SMALL)
    store = tmpfs / "s.db"
    done = arena("run", "faults.toml", "--store", str(store), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    line = one_line(done.stderr)
    assert f"--store {store}: cannot write it (database or disk is full); the run just measured is kept in " in line
    kept = line.split(" is kept in ")[1].split(":")[0]
    assert Path(kept).is_file() and "arena import" in line
    with open_store(str(store)) as s:  # the runs stored before the disk filled are there, whole
        before = len(s.runs("faults"))
    assert 1 <= before < 6
    copy = tmp_path / "elsewhere.db"
    shutil.copy(store, copy)
    name, added, already = import_rescued(kept, str(copy))
    assert (name, added, already) == ("faults", 1, 0)
    with open_store(str(copy)) as s:
        assert len(s.runs("faults")) == before + 1
    assert import_rescued(kept, str(copy))[1:] == (0, 1)  # bringing it in twice adds nothing


def test_a_store_that_cannot_be_written_is_refused_before_anything_runs(tmpfs, tmp_path):
    with Store(tmpfs / "s.db"):
        pass
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    (tmp_path / "faults.toml").write_text(SMALL)
    done = arena("run", "faults.toml", "--store", str(tmpfs / "s.db"), cwd=tmp_path)
    assert done.returncode == 2 and "runs done" not in done.stdout
    assert one_line(done.stderr).startswith(f"arena: error: --store {tmpfs / 's.db'}: cannot write it (")
    # reading it needs no writing
    shown = arena("ls", "--store", str(tmpfs / "s.db"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr


def test_a_store_in_a_missing_directory_is_one_line_before_anything_runs(tmp_path):
    (tmp_path / "faults.toml").write_text(SMALL)
    done = arena("run", "faults.toml", "--store", str(tmp_path / "nowhere" / "s.db"), cwd=tmp_path)
    assert done.returncode == 2
    assert one_line(done.stderr) == (f"arena: error: --store {tmp_path / 'nowhere' / 's.db'}: its directory "
                                     f"{tmp_path / 'nowhere'} does not exist")


def test_a_store_removed_mid_run_keeps_the_next_run_in_a_file_beside_it(tmp_path):
    path = tmp_path / "s.db"
    m = Machine()
    drive = m.drive

    def remove_then_drive(spec, cpus=None, live=None):
        if len(m.driven) == 2:
            path.unlink()  # SQLite would go on writing into the removed file: the run would be lost
        return drive(spec, cpus, live)

    seams = m.seams()
    seams.drivers["arena-load"] = remove_then_drive
    with Store(path) as store:
        with pytest.raises(NotSaved) as e:
            run_experiment(experiment(), store, seams=seams)
    message = str(e.value)
    assert "\n" not in message and f"--store {path}: the store's file is gone" in message
    kept = message.split(" is kept in ")[1].split(":")[0]
    assert Path(kept).parent == tmp_path
    name, added, _ = import_rescued(kept, str(tmp_path / "new.db"))
    assert (name, added) == ("fake", 1)


def test_reading_commands_never_write_the_store(tmp_path):
    old = tmp_path / "old.db"
    shutil.copy(report_store(), old)  # an older schema: reading it upgrades a copy in memory
    digest = hashlib.sha256(old.read_bytes()).hexdigest()
    for argv in (["ls"], ["show"], ["export", "tiny-grid", "--format", "csv"]):
        done = arena(*argv, "--store", str(old), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert hashlib.sha256(old.read_bytes()).hexdigest() == digest, argv
    empty = tmp_path / "empty.db"
    empty.touch()
    done = arena("show", "--store", str(empty), cwd=tmp_path)
    assert done.returncode == 2 and "not an Arena store (an empty file" in one_line(done.stderr)
    assert empty.stat().st_size == 0


def test_an_older_store_is_upgraded_by_a_writing_command_after_a_backup(tmp_path):
    import sqlite3

    from arena.results.store import MIGRATIONS

    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.executescript(f"BEGIN; {MIGRATIONS[0]}; PRAGMA user_version = 1; COMMIT;")
    db.close()
    before = path.read_bytes()
    with open_store(str(path)) as s:  # reading: the file stays at version 1
        assert s.version == SCHEMA_VERSION
    assert path.read_bytes() == before
    with open_store(str(path), write=True) as s:
        assert s.version == SCHEMA_VERSION
    backup = sqlite3.connect(tmp_path / "s.db.schema1.bak")  # the store as it was: version 1, its tables
    assert backup.execute("PRAGMA user_version").fetchone() == (1,)
    assert {r[0] for r in backup.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {"experiments", "runs"}
    with pytest.raises(ArenaError, match="no such store"):
        open_store(str(tmp_path / "missing.db"))


def test_a_disk_filling_during_the_reports_export_is_one_line_and_leaves_no_half_page(tmpfs, tmp_path):
    store = tmp_path / "s.db"
    shutil.copy(report_store(), store)
    html = tmpfs / "report.html"
    (tmpfs / "filler").write_bytes(b"x" * 70_000)  # what is left cannot hold the page (~4 MB with plotly)
    done = arena("report", "tiny-grid", "--store", str(store), "-o", str(html), cwd=tmp_path)
    assert done.returncode == 2
    assert one_line(done.stderr) == f"arena: error: --output {html}: cannot write it (No space left on device)"
    assert sorted(p.name for p in tmpfs.iterdir()) == ["filler"]  # no report, no temporary file
    # an export directory that cannot be made is refused before the page is written
    out = tmp_path / "r.html"
    below_a_file = tmpfs / "filler" / "charts"
    done = arena("report", "tiny-grid", "--store", str(store), "-o", str(out), "--export", str(below_a_file), cwd=tmp_path)
    assert done.returncode == 2
    assert one_line(done.stderr) == f"arena: error: --export {below_a_file}: cannot make it (Not a directory)"
    assert not out.exists()


def _access_log(path: Path, n: int) -> None:
    """A combined log of ``n`` requests of 2,000 shapes: written with --keep-values (the words kept),
    a mix of 1,000 templates, about 150 KB."""
    with open(path, "w") as f:
        for i in range(n):
            f.write(f'10.0.0.1 - - [14/Nov/2023:22:{i // 6000 % 60:02d}:{i // 100 % 60:02d} +0000] '
                    f'"GET /section{i % 2000}/posts/{i % 97}?page={i % 13} HTTP/1.1" 200 512 "-" "curl"\n')


def test_a_disk_filling_while_a_mix_is_written_leaves_none_and_the_old_one_whole(tmpfs, tmp_path):
    log = tmp_path / "access.log"
    _access_log(log, 20_000)
    out = tmpfs / "mix.toml"
    out.write_text("# the user's own mix\n")
    (tmpfs / "filler").write_bytes(b"x" * 60_000)  # what is left cannot hold the mix (~150 KB)
    done = arena("mix", "from-log", str(log), "-o", str(out), "--coverage", "1", "--keep-values", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_line(done.stderr) == f"arena: error: -o {out}: cannot write it (No space left on device)"
    assert sorted(p.name for p in tmpfs.iterdir()) == ["filler", "mix.toml"]  # no half mix, no temporary file
    assert out.read_text() == "# the user's own mix\n"


def test_sigkill_during_mix_from_log_leaves_the_old_output_or_a_whole_new_one(tmp_path):
    """arena mix from-log killed (SIGKILL) at six moments spread over its run, from reading the log to
    writing the mix: each time the output is the old file or the whole new mix, and nothing else is
    left beside it (the mix is written to an anonymous file, linked and renamed over the old)."""
    from arena.mix import load_mix

    log = tmp_path / "access.log"
    _access_log(log, 100_000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "mix.toml"
    argv = [*ARENA, "mix", "from-log", str(log), "-o", str(out), "--coverage", "1", "--keep-values"]
    start = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    whole, took = out.read_text(), time.monotonic() - start
    load_mix(out)
    seen = set()
    for k in range(6):
        out.write_text("# the user's own mix\n")
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(took * (k + 0.5) / 6)
        proc.kill()
        proc.wait(timeout=30)
        text = out.read_text()
        assert text in ("# the user's own mix\n", whole)
        assert [p.name for p in out_dir.iterdir()] == ["mix.toml"]
        seen.add(text == whole)
    assert False in seen  # killed before the write at least once (the kills spread over the run)


def _load_while(url: str, act, *flags: str, after_s: float = 1.0) -> subprocess.CompletedProcess:
    """arena load at ``url`` for 3 s (generator on CPU 0), calling ``act(arena_load_pid)`` once the
    generator has run ``after_s``: its own child, found by the parent's pid, never by name."""
    import psutil

    proc = subprocess.Popen([*ARENA, "load", url, "-c", "2", "-d", "3s", "--cpus", "0", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    me, acted = psutil.Process(proc.pid), False
    deadline = time.monotonic() + 30
    while not acted and proc.poll() is None and time.monotonic() < deadline:
        for kid in me.children():
            try:
                # running for after_s, and working (its measured window has begun: warm-up is 0)
                if kid.name() == "arena-load" and time.time() - kid.create_time() >= after_s \
                        and sum(kid.cpu_times()[:2]) > 0:
                    act(kid.pid)
                    acted = True
                    break
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.02)
    out, err = proc.communicate(timeout=60)
    assert acted, f"arena-load was not seen running\n{out}\n{err}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.integration
def test_faults_of_the_generator_and_the_server_under_arena_load():
    import signal

    from arena.servers.launch import ServerSpec, start

    require_server("gunicorn-gthread")
    with start(ServerSpec("gunicorn-gthread", "wsgi", processes=2, threads=2, cpus=[1])) as server:
        url = f"{server.url}/work?cpu_ms=1"

        def pause(pid):  # SIGSTOP of the generator for 0.6 s: its pause, not a server stall
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.6)
            os.kill(pid, signal.SIGCONT)

        paused = _load_while(url, pause)
        verdict = [line for line in paused.stdout.splitlines() if line.startswith("INVALID: ")]
        assert paused.returncode == 1 and verdict, paused.stdout + paused.stderr
        # (a run whose generator was paused is judged by the pause: first cause)
        assert verdict[0].startswith("INVALID: generator saturated: the generator did not run for ")
        assert "stalled" not in verdict[0]

        killed = _load_while(url, lambda pid: os.kill(pid, signal.SIGKILL))
        assert killed.returncode == 1 and one_line(killed.stderr) == \
            "arena: error: arena-load was killed by SIGKILL during the run: no result"

        def freeze_server(_):  # SIGSTOP of every server process for 1.5 s (a whole 1-s interval without an
            # answer): the server's stall, not the generator's
            pids = server.procset.pids()
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(1.5)
            for pid in pids:
                os.kill(pid, signal.SIGCONT)

        frozen = _load_while(url, freeze_server, after_s=0.5)
        verdict = [line for line in frozen.stdout.splitlines() if line.startswith("INVALID: ")]
        # the server's own symptom (a stalled interval, or its halves' drift where the freeze spans two
        # intervals), never blamed on the generator
        assert frozen.returncode == 1 and verdict and ("stalled" in verdict[0] or "drifted" in verdict[0]), frozen.stdout
        assert "generator" not in verdict[0]

        before = server.procset.pids()
        worker = max(before)  # a worker (the arbiter started first)
        lost = _load_while(url, lambda pid: os.kill(worker, signal.SIGKILL))
        verdict = [line for line in lost.stdout.splitlines() if line.startswith("INVALID: ")]
        assert lost.returncode == 1 and verdict and f"1 of the server's {len(before)} processes exited" in verdict[0]
    assert cgroup.survivors(server.procset.name) == []


@pytest.mark.integration
def test_a_server_that_closes_connections_mid_response_makes_an_invalid_load(tmp_path):
    """A target that answers a few bytes of each response and closes: errors, one INVALID line, exit 1."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        done = arena("load", f"http://127.0.0.1:{listener.getsockname()[1]}/", "-c", "2", "-d", "1s", cwd=tmp_path)
    finally:
        stop.set()
        thread.join()
        listener.close()
    verdict = [line for line in done.stdout.splitlines() if line.startswith("INVALID: ")]
    assert done.returncode == 1 and len(verdict) == 1 and "Traceback" not in done.stderr
    assert verdict[0].startswith("INVALID: no request succeeded: ")
