"""Every bad experiment file in tests/fixtures/bad-experiments and every bad command line in the
table below: exit status 2, one line of error that names the file, key or flag and the value, and
never a traceback. Each file's first line says what its error must contain."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from arena.cli import main
from arena.plan.reader import keys_of

BAD = Path(__file__).parent / "fixtures" / "bad-experiments"


def one_line_error(argv, capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    captured = capsys.readouterr()
    assert code == 2, (argv, captured.out, captured.err)
    assert "Traceback" not in captured.err + captured.out
    assert captured.err.count("\n") == 1, captured.err
    return captured.err


@pytest.mark.parametrize("path", sorted(BAD.glob("*.toml")), ids=lambda p: p.stem)
def test_a_bad_experiment_file_is_one_line(path, capsys):
    expect = path.read_bytes().splitlines()[0].decode().removeprefix("# expect: ")
    err = one_line_error(["run", str(path), "--dry-run"], capsys)
    at = re.match(rf"arena: error: {re.escape(str(path))}(?::(\d+))?: ", err)
    assert at and expect in err, err
    key = re.match(r"([A-Za-z_][\w.\[\]]*) = ", expect)
    if key and path.stem != "no-servers":  # a key of the file: the line that holds it, as compilers say it
        assert at.group(1), err
        line = path.read_bytes().splitlines()[int(at.group(1)) - 1].decode()
        assert [k for k in keys_of(key.group(1)) if isinstance(k, str)][-1] in line, (line, err)


def test_a_directory_or_a_missing_file_is_one_line(tmp_path, capsys):
    assert f"{tmp_path}: is a directory" in one_line_error(["run", str(tmp_path), "--dry-run"], capsys)
    assert "no such experiment file" in one_line_error(["run", str(tmp_path / "none.toml"), "--dry-run"], capsys)


BAD_LINES = [
    (["serve", "puma", "--host", "203.0.113.7"], "--host 203.0.113.7: not an address this machine can listen on"),
    (["serve", "puma", "--host", "no-such-host.invalid", "--port", "8080"], "--host no-such-host.invalid: not an address"),
    (["serve", "puma", "--processes", "4096"], "--processes/-w/--workers: must be a whole number from 1 to 256"),
    (["serve", "nope"], "nope"),
    (["load", "http://127.0.0.1:9/", "-d", "1s", "--json", "/nonexistent/dir/r.json"],
     "--json /nonexistent/dir/r.json: cannot write it"),
    (["load", "http://127.0.0.1:9/", "-d", "inf"], "--duration: must be a duration"),
    (["load", "http://127.0.0.1:9/", "-d", "1e9"], "--duration: must be a duration"),
    (["load", "http://127.0.0.1:9/a\r\nX: b", "-d", "1s"], "URL: must not hold control characters such as CR or LF"),
    (["load", "http://127.0.0.1:9/", "-d", "1s", "-H", "A: b\r\nC: d"], "--header: must not hold control characters"),
    (["load", "http://10.1.2.3/", "-d", "1s"], "is not a loopback address"),
    (["predict", "--server", "puma", "--cpu-ms", "1e308", "--io-ms", "0", "--concurrency", "1"], "--cpu-ms: must be"),
    (["predict", "--server", "puma", "--cpu-ms", "5", "--io-ms", "1e300", "--concurrency", "1"], "--io-ms: must be"),
    (["predict", "--server", "puma", "--cpu-ms", "5", "--io-ms", "0", "--concurrency", "1", "--cores", "1e-300"],
     "--cores: must be"),
    (["predict", "--server", "puma", "--cpu-ms", "5", "--io-ms", "0", "--concurrency", "100000"], "--concurrency: must be"),
    (["predict", "--server", "puma", "--cpu-ms", "nan", "--io-ms", "0", "--concurrency", "1"], "--cpu-ms: must be"),
    (["recommend", "x", "--concurrency", "0"], "--concurrency: must be"),
    (["show", "--store", "/nonexistent/none.db"], "--store /nonexistent/none.db: no such store"),
    (["report", "--p99-max", "-3"], "--p99-max"),
    (["run"], "the following arguments are required: experiment"),
    (["nope"], "invalid choice: 'nope'"),
    # a negative value is the option's value, refused by its type (not argparse's "expected one argument")
    (["load", "http://127.0.0.1:9/", "-d", "-5s"], "argument -d/--duration: must be a duration such as 10s, 500ms or 2m"),
    (["load", "http://127.0.0.1:9/", "--warmup", "-1s"], "argument --warmup: must be a duration such as 10s, 500ms or 2m"),
    (["check", "gunicorn-sync", "--app", "broken:app:x"],
     "--app: 'broken:app:x' is neither module:callable (one colon: package.module:attribute, or module:factory()) "
     "nor a config.ru"),
    (["predict", "--server", "wsgiref", "--threads", "4", "--cpu-ms", "5", "--io-ms", "5", "--concurrency", "4"],
     "--threads: wsgiref has no threads knob (its knobs: none)"),
    (["reproduce", "--list", "extra"], "--list: lists every study; give it alone, or give the study 'extra' without it"),
    (["show", "--store", "/tmp"], "--store /tmp: is a directory"),
    # a name that is not loopback is refused without being looked up
    (["load", "http://example.com/", "-d", "1s"], "'example.com' is not a loopback name"),
    (["tune", "--cpus", "1", "--p99-max", "fast"], "--p99-max: must be a latency such as 200ms"),
    (["tune", "--cpus", "1", "--p99-max", "200ms", "--memory-max", "lots"], "--memory-max: must be a size such as 512MiB"),
    (["tune", "--cpus", "1", "--p99-max", "200ms", "--servers", "gunicron"], "--servers gunicron: unknown server"),
    (["tune", "--cpus", "1", "--p99-max", "200ms", "--app", "/nonexistent/config.ru"],
     "--app: /nonexistent/config.ru does not exist"),
    (["tune", "--cpus", "1", "--p99-max", "200ms", "--rate", "10", "--concurrency", "4"], "not allowed with argument"),
    (["tune", "--cpus", "1", "--p99-max", "200ms", "--mix", "nope.toml"], "--mix nope.toml: no such mix file"),
    (["tune", "--cpus", "1", "--p99-max", "200ms", "--app", "nosuch:app"],
     "--app nosuch:app: does not import from "),
    # limits the kernel cannot apply, or no server starts under, named as the user wrote them
    (["serve", "puma", "--cpu-limit", "0.5", "--cpu-period", "1ms"],
     "--cpu-limit 0.5: is 0.5 ms of CPU time a 1 ms period, below the kernel's smallest quota of 1 ms a period: "
     "at least 1 cores with this period"),
    (["run", "scenarios/quick.toml", "--dry-run", "--cpu-limit", "0.0001"],
     "--cpu-limit 0.0001: is 0.01 ms of CPU time a 100 ms period, below the kernel's smallest quota"),
    (["tune", "--cpus", "1", "--p99-max", "200ms", "--memory-limit", "1KiB"],
     "argument --memory-limit: '1KiB' is below 6MiB, the smallest memory limit a container runtime sets"),
    (["servers", "--node-cores", "4", "--cpu-limit", "8"],
     "--cpu-limit 8: above the node's 4 cores (--node-cores): a quota larger than the node could never bind"),
]


@pytest.mark.parametrize("argv, expect", BAD_LINES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_bad_command_line_is_one_line(argv, expect, capsys):
    assert expect in one_line_error(argv, capsys)


def test_an_empty_store_is_an_error_not_a_blank_line(tmp_path, capsys):
    from arena.results.store import Store

    Store(tmp_path / "empty.db").close()
    assert "the store has no experiment" in one_line_error(["show", "--store", str(tmp_path / "empty.db")], capsys)


def test_no_traceback_when_run_as_a_program(tmp_path):
    """The same through the entry point, as a user runs it (the in-process table cannot see an import-time trace)."""
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"name = \"\xff\"\n")
    r = subprocess.run([sys.executable, "-m", "arena", "run", str(bad), "--dry-run"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not UTF-8" in r.stderr


@pytest.mark.parametrize("argv, hint", [
    (["shwo"], "did you mean show?"),
    (["serve", "gunicorn"], "did you mean gunicorn-sync, gunicorn-gthread, gunicorn-gevent, gunicorn-uvicorn?"),
    (["predict", "--server", "pumma", "--cpu-ms", "1", "--io-ms", "1", "--concurrency", "1"], "did you mean puma?"),
    (["run", "x.toml", "--dryrun"], "unrecognized arguments: --dryrun; did you mean --dry-run?"),
    (["show", "--jsn=1"], "unrecognized arguments: --jsn=1; did you mean --json?"),
])
def test_a_near_miss_gets_a_did_you_mean(argv, hint, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own refusal (a command name)
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert hint in err and err.count("\n") == 1


def test_did_you_mean_offers_a_familys_members_and_close_spellings():
    from arena.errors import did_you_mean

    assert did_you_mean("gunicorn", ["puma", "gunicorn-sync", "gunicorn-gthread"]) == \
        "did you mean gunicorn-sync, gunicorn-gthread? "
    assert did_you_mean("pmua", ["puma", "unicorn"]) == "did you mean puma? "
    assert did_you_mean("zzz", ["puma"]) == ""
