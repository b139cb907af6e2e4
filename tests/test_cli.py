"""The CLI: one-line errors for bad input, and `arena serve` stopped by SIGINT, SIGTERM or SIGKILL."""

import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from arena.cli import main
from arena.http_client import Client, port_free
from arena.servers import catalog, cgroup
from arena.servers.launch import reap_stale_workdirs
from tests.conftest import require_server


@pytest.mark.parametrize("argv, message", [
    (["serve", "nope"], "arena: error: server: unknown server 'nope' (servers: webrick, "),
    (["serve", "unicorn", "--threads", "4"],
     "arena: error: --threads: unicorn serving rack has no threads knob (its knobs: processes)"),
    (["serve", "puma", "--app", "flask"], "arena: error: --app: puma cannot serve 'flask' (wsgi); it serves: rack,"),
    (["serve", "puma", "--app", "django"], "arena: error: --app: 'django' is not a built-in app (wsgi, asgi, flask,"),
    (["serve", "puma", "--cpus", "99"], "arena serve: error: argument --cpus: CPU 99 is not available, got '99'"),
    (["serve", "puma", "--processes", "0"],
     "arena serve: error: argument --processes/-w/--workers: must be a whole number from 1 to 256, got '0'"),
    (["serve", "puma", "--port", "http"], "arena serve: error: argument --port: must be a whole number from 1 to 65535"),
    (["check", "--app", "django"], "arena: error: --app: 'django' is not a built-in app"),
    (["check", "thin", "--app", "flask"], "arena: error: --app: none of thin serves flask"),
    (["load", "http://127.0.0.1:1/", "--download", "fast"],
     "arena load: error: argument --download: must be bytes per second such as \"64KiB/s\""),
    (["load", "http://127.0.0.1:1/", "--delay", "2m"],
     "arena load: error: argument --delay: must be a duration such as 10s, 500ms or 2m, at most 60s, got '2m'"),
])
def test_bad_input_is_one_line_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) if argv[-1] in ("99", "0", "http", "fast", "2m") else _no_exit() as e:
        code = main(argv)
    code = e.value.code if e else code
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err


class _no_exit:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_a_port_in_use_is_refused(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["serve", "puma", "--port", str(port)]) == 2
    assert capsys.readouterr().err == f"arena: error: --port: 127.0.0.1:{port} is in use, choose another or leave it out\n"


def test_servers_lists_the_catalog(capsys):
    assert main(["servers"]) == 0
    out = capsys.readouterr().out
    for name in catalog.CATALOG:
        assert name in out


# ---------------------------------------------------------------------- arena serve, stopped by signals


def serve(*args: str) -> tuple[subprocess.Popen, str, str]:
    """Start `arena serve` in its own session, with SIGINT ignored as a background job inherits it
    (Arena must handle it anyway); return it, its URL and its set's name."""
    proc = subprocess.Popen([sys.executable, "-m", "arena", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    out, deadline = b"", time.monotonic() + 90
    while b"Ctrl-C" not in out:
        assert time.monotonic() < deadline and proc.poll() is None, out.decode()
        if select.select([proc.stdout], [], [], 1)[0]:
            out += os.read(proc.stdout.fileno(), 65536)
    text = out.decode()
    return proc, re.search(r"http://127\.0\.0\.1:\d+", text).group(0), re.search(r"arena-\d+-\d+-[\w-]+", text).group(0)


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out.decode()


@pytest.mark.integration
@pytest.mark.parametrize("server, sig, code", [("puma", signal.SIGINT, 0), ("passenger", signal.SIGTERM, 143),
                                               ("gunicorn-gthread", signal.SIGINT, 0)])
def test_serve_stops_everything_on_a_signal(server, sig, code):
    require_server(server)
    proc, url, group = serve(server, "--processes", "2", "--cpus", "0")
    port = int(url.rsplit(":", 1)[1])
    try:
        assert cgroup.survivors(group), "the server runs in the set named in the banner"
        with Client("127.0.0.1", port) as client:
            stamp = f"t={int(time.time() * 1e6)}"
            reply = client.get("/work?cpu_ms=20&io_ms=30&bytes=1000", {"X-Request-Start": stamp})
        assert reply.status == 200 and len(reply.body) == 1000
        timing = reply.timing()
        assert 20 <= timing["cpu"] < 26 and 30 <= timing["io"] < 250 and "queue" in timing
        proc.send_signal(sig)
        returncode, out = finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert returncode == code, out
    assert cgroup.survivors(group) == []
    assert port_free("127.0.0.1", port)


@pytest.mark.integration
def test_a_killed_arena_leaves_a_group_that_the_next_start_reaps():
    """SIGKILL gives Arena no chance to clean up: the next Arena reaps the orphaned set."""
    require_server("passenger")
    proc, url, group = serve("passenger", "--processes", "2")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert cgroup.survivors(group), "passenger's daemons outlive a killed Arena"
    if cgroup.choose_backend() == "none":
        pytest.skip("stale groups are a cgroup matter")
    workdirs = list(Path(tempfile.gettempdir()).glob(f"{group}-*"))
    assert len(workdirs) == 1
    reaped = cgroup.reap_stale()
    assert any(group in r for r in reaped)
    assert cgroup.survivors(group) == []
    assert reap_stale_workdirs() == workdirs and not workdirs[0].exists()
    assert port_free("127.0.0.1", int(url.rsplit(":", 1)[1]))


def test_a_figure_the_driver_does_not_measure_is_a_dash_not_a_zero():
    from arena.cli.run import _ms

    assert _ms(None, 8, 2).strip() == "-" and len(_ms(None, 8, 2)) == len(_ms(1500, 8, 2))
    assert _ms(1500, 8, 2) == "    1.50 ms" and _ms(0, 0, 1) == "0.0 ms"  # a measured zero stays a zero


def test_version_and_the_width_of_piped_tables():
    import os
    import subprocess
    import sys

    from arena import __version__

    done = subprocess.run([sys.executable, "-m", "arena", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"arena {__version__}"
    env = {**os.environ, "COLUMNS": "60"}
    narrow = subprocess.run([sys.executable, "-m", "arena", "servers"], capture_output=True, text=True, timeout=60,
                            env=env)
    assert narrow.returncode == 0 and max(map(len, narrow.stdout.splitlines())) <= 60
    env.pop("COLUMNS")
    wide = subprocess.run([sys.executable, "-m", "arena", "servers"], capture_output=True, text=True, timeout=60, env=env)
    assert max(map(len, wide.stdout.splitlines())) > 60  # piped without COLUMNS: 200 wide, not rich's 80


def test_the_store_is_arena_store_or_arena_db_here(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import report_store

    env = {**os.environ, "ARENA_STORE": report_store()}
    found = subprocess.run([sys.executable, "-m", "arena", "ls"], capture_output=True, text=True, timeout=60,
                           cwd=tmp_path, env=env)
    assert found.returncode == 0 and "tiny-grid" in found.stdout
    env.pop("ARENA_STORE")
    missing = subprocess.run([sys.executable, "-m", "arena", "ls"], capture_output=True, text=True, timeout=60,
                             cwd=tmp_path, env=env)
    assert missing.returncode == 2 and f"looked for {tmp_path / 'arena.db'}" in missing.stderr
    # found in a parent, as git finds its repository; the command says which store it read
    import shutil

    shutil.copy(report_store(), tmp_path / "arena.db")
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    shown = subprocess.run([sys.executable, "-m", "arena", "show", "tiny-grid"], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path / "sub" / "deeper", env=env)
    assert shown.returncode in (0, 4) and shown.stdout.splitlines()[0] == f"store {tmp_path / 'arena.db'}", shown.stdout


def test_the_knob_variables_of_the_callers_shell_are_said_to_be_unused():
    from arena.app.servers import unused_environment

    found = {(u.variable, u.knob): u for u in unused_environment({"WEB_CONCURRENCY": "4", "RAILS_MAX_THREADS": "3",
                                                                    "HOME": "/root"})}
    assert set(found) == {("WEB_CONCURRENCY", "processes"), ("RAILS_MAX_THREADS", "threads")}
    assert {"puma", "gunicorn-sync", "unicorn"} <= set(found[("WEB_CONCURRENCY", "processes")].servers)
    assert found[("RAILS_MAX_THREADS", "threads")].servers == ("puma",)
    assert unused_environment({"HOME": "/root"}) == []
    # the servers' other settings from the environment: gunicorn's command line, Puma's own defaults
    other = {u.variable: u for u in unused_environment({"GUNICORN_CMD_ARGS": "--workers 9", "PUMA_MAX_THREADS": "32",
                                                        "UVICORN_WORKERS": "3", "PUMA_EMPTY": "", "UWSGI": "x"})}
    assert set(other) == {"GUNICORN_CMD_ARGS", "PUMA_MAX_THREADS", "UVICORN_WORKERS"}
    assert other["GUNICORN_CMD_ARGS"].knob is None and {"gunicorn-sync", "gunicorn-gthread"} <= set(
        other["GUNICORN_CMD_ARGS"].servers)
    assert other["PUMA_MAX_THREADS"].servers == ("puma",) and other["UVICORN_WORKERS"].servers == ("uvicorn",)
    said = subprocess.run([sys.executable, "-m", "arena", "check", "gunicorn-sync", "--app", "wsgi"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GUNICORN_CMD_ARGS": "--workers 9"})
    assert "note: GUNICORN_CMD_ARGS=--workers 9 in your environment is not passed to the servers" in said.stdout


def test_workers_and_t_are_the_servers_own_words_for_processes_and_threads():
    from arena.cli import build_parser

    p = build_parser()
    for argv in (["serve", "puma", "-w", "2", "-t", "3"], ["check", "puma", "--workers", "2", "--threads", "3"],
                 ["predict", "--server", "puma", "--workers", "2", "-t", "3"]):
        args = p.parse_args(argv)
        assert (args.processes, args.threads) == (2, 3), argv


def test_one_command_imports_its_own_module_only():
    """`arena show` builds show's parser and imports show's module, not the other 18 commands' (and
    the engines they import); the whole parser still knows every command."""
    import subprocess
    import sys

    from arena.cli import COMMANDS

    probe = ("import sys; from arena.cli import build_parser; p = build_parser('show'); "
             "print(sorted(p._subparsers._group_actions[0].choices)); "
             "print(sorted(m for m in sys.modules if m.startswith('arena.cli.') and m != 'arena.cli.args'))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['show']", "['arena.cli.show']"]
    from arena.cli import build_parser

    assert set(build_parser()._subparsers._group_actions[0].choices) == set(COMMANDS)


def test_every_command_has_examples_that_parse():
    import shlex

    from arena.cli import COMMANDS, EXAMPLES, build_parser

    assert set(EXAMPLES) == set(COMMANDS)
    p = build_parser()
    for name, lines in EXAMPLES.items():
        assert "examples:" in p._subparsers._group_actions[0].choices[name].format_help()
        for line in lines:
            words = shlex.split(line.split(" > ")[0])  # a redirection is the shell's
            assert words[0] == "arena" and words[1] == name
            p.parse_args([w.replace("~", "/home") for w in words[1:]])  # an example that does not parse fails here


def test_completion_scripts_know_every_command_and_its_flags(tmp_path):
    import subprocess
    import sys

    from arena.cli import COMMANDS

    done = subprocess.run([sys.executable, "-m", "arena", "completion", "bash"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    script = tmp_path / "arena.bash"
    script.write_text(done.stdout)
    # bash itself reads it and completes "arena sh" and "arena run --until"
    probe = ("source {0}; COMP_WORDS=(arena sh); COMP_CWORD=1; _shtab_arena; echo ${{COMPREPLY[*]}}; "
             "COMP_WORDS=(arena run --until); COMP_CWORD=2; _shtab_arena; echo ${{COMPREPLY[*]}}").format(script)
    words = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert set(words[0].split()) == {c for c in COMMANDS if c.startswith("sh")}
    assert "--until-decided" in words[1].split()
    zsh = subprocess.run([sys.executable, "-m", "arena", "completion", "zsh"], capture_output=True, text=True, timeout=60)
    assert zsh.returncode == 0 and "#compdef arena" in zsh.stdout
    # fish reads its own script and completes the same
    made = subprocess.run([sys.executable, "-m", "arena", "completion", "fish"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0
    fish_script = tmp_path / "arena.fish"
    fish_script.write_text(made.stdout)
    said = subprocess.run(["fish", "-c", f"source {fish_script}; complete -C 'arena sh'; echo ---; "
                                         "complete -C 'arena run --until'; echo ---; complete -C 'arena serve -'"],
                          capture_output=True, text=True, timeout=60)
    assert said.returncode == 0, said.stderr
    commands, flags, serve = (part.split("\n") for part in said.stdout.strip().split("\n---\n"))
    assert {line.split("\t")[0] for line in commands} == {c for c in COMMANDS if c.startswith("sh")}
    assert any(line.startswith("--until-decided\t") for line in flags)
    assert {"-w", "--workers", "--processes", "-t", "--threads"} <= {line.split("\t")[0] for line in serve}


def test_every_command_that_prints_data_takes_format_and_json_its_alias():
    """report/formats/: each command offers --format with its formats, text first and by default, and
    --json, which is --format json; the two are one choice."""
    from arena.cli import build_parser
    from arena.report.formats import SCHEMAS, formats, schema

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    for command in SCHEMAS:
        options = {o: a for a in sub.choices[command]._actions for o in a.option_strings}
        offered = formats(command)
        assert options["--format"].choices == offered and offered[:2] == ("text", "json"), command
        assert (Path(__file__).resolve().parents[1] / schema(command)).is_file(), command
    assert {"compare", "tune", "show", "recommend", "predict", "ls"} <= set(SCHEMAS)
    assert formats("show") == formats("compare") == ("text", "json", "junit", "markdown")
    assert parser.parse_args(["ls", "--json"]).format == parser.parse_args(["ls", "--format", "json"]).format == "json"
    assert parser.parse_args(["ls"]).format == "text"
    assert parser.parse_args(["compare", "a", "b", "--json"]).format == "json"
    with pytest.raises(SystemExit):
        parser.parse_args(["show", "--json", "--format", "markdown"])


def test_show_json_and_format_json_print_one_document(capsys):
    from tests.conftest import report_store

    assert main(["show", "--store", report_store(), "--json"]) == 0
    one = capsys.readouterr().out
    assert main(["show", "--store", report_store(), "--format", "json"]) == 0
    assert capsys.readouterr().out == one and one.startswith("[")


@pytest.mark.parametrize("argv, schema", [(["servers", "--json"], "servers"), (["ls", "--json"], "ls")])
def test_json_outputs_match_their_schemas(argv, schema, capsys):
    import json

    import jsonschema

    from tests.conftest import report_store

    assert main(argv + (["--store", report_store()] if schema == "ls" else [])) == 0
    doc = json.loads(capsys.readouterr().out)
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    jsonschema.Draft202012Validator(json.loads((root / "schemas" / f"{schema}.schema.json").read_text())).validate(doc)
    if schema == "ls":
        assert [e["name"] for e in doc["experiments"]] == ["tiny-grid"] and doc["experiments"][0]["runs"] == 32
    else:
        puma = next(s for s in doc["servers"] if s["name"] == "puma")
        assert puma["knobs"]["threads"]["env"] == "RAILS_MAX_THREADS" and puma["available"]


@pytest.mark.integration
def test_check_prints_json_alone_on_standard_output():
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import jsonschema

    from tests.conftest import require_server

    require_server("puma")
    done = subprocess.run([sys.executable, "-m", "arena", "check", "puma", "--app", "rack", "--json"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "WEB_CONCURRENCY": "2"})
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # the note on WEB_CONCURRENCY went to standard error
    schema = json.loads((Path(__file__).resolve().parents[1] / "schemas" / "check.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["passed"] == 1 and doc["results"][0]["server"] == "puma" and "WEB_CONCURRENCY=2" in done.stderr


def test_the_default_store_is_found_in_the_nearest_parent_like_git(tmp_path):
    from arena.cli.args import default_store

    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert default_store(str(deep)) == "arena.db"  # none anywhere up to the root: here
    (tmp_path / "arena.db").write_bytes(b"")
    assert default_store(str(deep)) == str(tmp_path / "arena.db")
    (deep / "arena.db").write_bytes(b"")
    assert default_store(str(deep)) == "arena.db"  # the nearest: this directory's own


def test_a_signal_during_a_fork_is_recorded_and_raised_after_it():
    from arena import errors
    from arena.cli import _stop

    try:
        with errors.forking():
            _stop(errors.Terminated)  # what the SIGTERM handler does: inside a fork it must not raise
        assert errors.asked_to_stop() is errors.Terminated
        with pytest.raises(errors.Terminated):
            errors.stop_if_asked()
        with pytest.raises(KeyboardInterrupt):
            _stop(KeyboardInterrupt)  # outside a fork: raised where it lands, and recorded too
        assert errors.asked_to_stop() is errors.Terminated  # SIGTERM's stop wins over Ctrl-C's
    finally:
        errors.clear_stop()
    errors.stop_if_asked()  # nothing asked: nothing raised
