"""The server catalog: knob resolution and command building are pure; checked against known argv."""

from pathlib import Path

import pytest

from arena.errors import ArenaError
from arena.servers import catalog
from arena.servers.catalog import CATALOG, build_command, resolve_knobs
from arena.subjects import APPS

WORKDIR = Path("/w")
BIN = Path("/venv/bin")


def argv(server: str, app: str, **knobs) -> list[str]:
    s, a = CATALOG[server], APPS[app]
    resolved = resolve_knobs(s, a, knobs, {})
    return build_command(s, a, resolved, host="127.0.0.1", port=8000, workdir=WORKDIR, bin_dir=BIN).argv


def test_the_catalog_has_every_server_the_studies_use():
    assert set(CATALOG) == {
        "webrick", "thin", "thin-threaded", "unicorn", "puma", "passenger",
        "wsgiref", "bjoern", "gunicorn-sync", "gunicorn-gthread", "gunicorn-gevent", "gunicorn-uvicorn", "daphne",
        "uvicorn", "hypercorn", "granian", "waitress", "uwsgi"}
    assert not set(catalog.MISSING) & set(CATALOG)  # a server is run, or said why not


@pytest.mark.parametrize("name", list(CATALOG))
def test_every_entry_is_complete_and_builds_for_every_app(name):
    s = CATALOG[name]
    assert s.model in catalog.MODELS and set(s.knobs) <= set(catalog.KNOBS)
    assert s.apps and s.install_hint and s.version and s.grace_s > 0 and s.ready_timeout_s > 0
    for app in s.apps:
        cmd = build_command(s, APPS[app], resolve_knobs(s, APPS[app], {}, {}), host="127.0.0.1", port=8000,
                            workdir=WORKDIR, bin_dir=BIN)
        assert not any("{" in part for part in cmd.argv), cmd.argv  # every template field was filled
        assert "8000" in " ".join(cmd.argv) + "".join(cmd.files.values())
        assert APPS[app].target in cmd.argv


def test_puma_is_single_mode_at_one_process_and_clustered_above():
    single = ["puma", "-C", "/w/puma.rb", "-e", "production", "-b", "tcp://127.0.0.1:8000", "-t", "8:8", APPS["rack"].target]
    assert argv("puma", "rack", threads=8) == single
    assert argv("puma", "rack", processes=1, threads=8) == single
    assert argv("puma", "rails", processes=2, threads=8) == single[:-1] + ["-w", "2", APPS["rails"].target]


def test_unicorn_processes_go_into_its_config_file():
    s, a = CATALOG["unicorn"], APPS["sinatra"]
    cmd = build_command(s, a, resolve_knobs(s, a, {"processes": 3}, {}), host="127.0.0.1", port=8000,
                        workdir=WORKDIR, bin_dir=BIN)
    assert cmd.argv == ["unicorn", "-c", "/w/unicorn.conf.rb", "-E", "production", a.target]
    assert "worker_processes 3\n" in cmd.files["unicorn.conf.rb"]
    assert "listen '127.0.0.1:8000'" in cmd.files["unicorn.conf.rb"]
    assert cmd.env["RACK_ENV"] == "production"


def test_passenger_is_fixed_size_and_never_calls_home():
    cmd = argv("passenger", "rack", processes=4)
    assert cmd[cmd.index("--min-instances") + 1] == "4" == cmd[cmd.index("--max-pool-size") + 1]
    assert "--disable-security-update-check" in cmd and "--disable-anonymous-telemetry" in cmd
    assert cmd[cmd.index("--engine") + 1] == "builtin"


def test_gunicorn_workers_and_threads():
    cmd = argv("gunicorn-gthread", "flask", processes=2, threads=4)
    assert cmd[:3] == ["/venv/bin/gunicorn", "-k", "gthread"]
    assert cmd[cmd.index("-w") + 1] == "2" and cmd[cmd.index("--threads") + 1] == "4"
    assert "--no-control-socket" in cmd and cmd[-1] == "arena.subjects.python.flask_app:app"


def test_optional_knob_flags_are_added_only_when_set():
    assert "--limit-concurrency" not in argv("uvicorn", "asgi")
    cmd = argv("uvicorn", "asgi", connections=64)
    assert cmd[cmd.index("--limit-concurrency") + 1] == "64" and cmd[-1] == APPS["asgi"].target


def test_granian_threads_apply_to_wsgi_only():
    cmd = argv("granian", "wsgi", processes=2, threads=8)
    assert cmd[cmd.index("--interface") + 1] == "wsgi" and cmd[cmd.index("--blocking-threads") + 1] == "8"
    assert "--blocking-threads" not in argv("granian", "asgi", processes=2)
    with pytest.raises(ArenaError, match="^--threads: granian serving asgi has no threads knob"):
        argv("granian", "asgi", threads=8)


def test_uwsgi_keeps_alive_and_dies_on_term():
    cmd = argv("uwsgi", "wsgi", processes=2, threads=3)
    assert cmd[cmd.index("--http11-socket") + 1] == "127.0.0.1:8000" and "--die-on-term" in cmd
    assert cmd[cmd.index("--home") + 1] == "/venv"


def test_convention_variables_set_defaults_and_flags_win():
    s, a = CATALOG["puma"], APPS["rack"]
    assert resolve_knobs(s, a, {}, {}) == {"processes": 1, "threads": 5}
    env = {"WEB_CONCURRENCY": "3", "RAILS_MAX_THREADS": "16"}
    assert resolve_knobs(s, a, {}, env) == {"processes": 3, "threads": 16}
    assert resolve_knobs(s, a, {"processes": 1}, env) == {"processes": 1, "threads": 16}
    with pytest.raises(ArenaError, match="^WEB_CONCURRENCY: must be a whole number from 1 to 256, got 'lots'"):
        resolve_knobs(s, a, {}, {"WEB_CONCURRENCY": "lots"})


def test_knob_errors_name_the_flag_and_what_is_allowed():
    s, a = CATALOG["unicorn"], APPS["rack"]
    with pytest.raises(ArenaError, match=r"^--threads: unicorn serving rack has no threads knob \(its knobs: processes\)"):
        resolve_knobs(s, a, {"threads": 4}, {})
    assert resolve_knobs(s, a, {"threads": 4}, {}, strict=False) == {"processes": 1}
    with pytest.raises(ArenaError, match="^--processes: must be a whole number from 1 to 256, got '0'"):
        resolve_knobs(s, a, {"processes": 0}, {})


def test_an_app_the_server_cannot_serve_is_refused():
    with pytest.raises(ArenaError, match="^--app: puma cannot serve 'flask'"):
        argv("puma", "flask")
    with pytest.raises(ArenaError, match="^server: unknown server 'nginx'"):
        catalog.get_server("nginx")


def settings_argv(server: str, app: str, settings: dict, extra: tuple[str, ...] = ()) -> catalog.Command:
    s, a = CATALOG[server], APPS[app]
    return build_command(s, a, resolve_knobs(s, a, {}, {}), host="127.0.0.1", port=8000, workdir=WORKDIR, bin_dir=BIN,
                         settings=catalog.check_settings(s, settings), extra_args=extra)


def test_preload_is_each_servers_own_way_of_loading_the_app_before_forking():
    assert "--preload" in settings_argv("puma", "rack", {"preload": True}).argv
    assert "--preload" not in settings_argv("puma", "rack", {"preload": False}).argv
    assert "preload_app true\n" in settings_argv("unicorn", "rack", {"preload": True}).files["unicorn.conf.rb"]
    assert "preload_app" not in settings_argv("unicorn", "rack", {"preload": False}).files["unicorn.conf.rb"]
    assert "--preload" in settings_argv("gunicorn-sync", "wsgi", {"preload": True}).argv
    assert "--lazy-apps" in settings_argv("uwsgi", "wsgi", {"preload": False}).argv  # uwsgi preloads by default
    assert "--lazy-apps" not in settings_argv("uwsgi", "wsgi", {"preload": True}).argv
    cmd = settings_argv("passenger", "rack", {"preload": False}).argv
    assert cmd[cmd.index("--spawn-method") + 1] == "direct"


def test_settings_become_flags_config_lines_or_variables_before_the_target():
    cmd = settings_argv("puma", "rack", {"keepalive_timeout": 5, "yjit": True, "preload": True}, ("--x", "1"))
    assert cmd.files["puma.rb"].endswith("persistent_timeout 5\n") and cmd.env["RUBY_YJIT_ENABLE"] == "1"
    assert cmd.argv[-4:] == ["--preload", "--x", "1", APPS["rack"].target]
    cmd = settings_argv("uvicorn", "asgi", {"loop": "asyncio", "http": "h11", "max_requests": 1000})
    assert cmd.argv[cmd.argv.index("--loop") + 1] == "asyncio"
    assert cmd.argv[cmd.argv.index("--http") + 1] == "h11"
    assert cmd.argv[cmd.argv.index("--limit-max-requests") + 1] == "1000"
    cmd = settings_argv("granian", "asgi", {"runtime_threads": 2})
    assert cmd.argv[cmd.argv.index("--runtime-threads") + 1] == "2" and cmd.argv[-1] == APPS["asgi"].target
    assert settings_argv("gunicorn-gthread", "wsgi", {"malloc_arena_max": 2}).env["MALLOC_ARENA_MAX"] == "2"
    assert "LD_PRELOAD" not in settings_argv("puma", "rack", {"allocator": "glibc"}).env


def test_jemalloc_is_preloaded_from_debians_library():
    if catalog.jemalloc() is None:
        with pytest.raises(ArenaError, match="libjemalloc is not installed"):
            settings_argv("puma", "rack", {"allocator": "jemalloc"})
    else:
        assert settings_argv("puma", "rack", {"allocator": "jemalloc"}).env["LD_PRELOAD"].endswith("libjemalloc.so.2")


def test_a_setting_the_server_lacks_or_a_wrong_value_is_refused_in_one_line():
    with pytest.raises(ArenaError) as e:
        catalog.check_settings(CATALOG["unicorn"], {"loop": "asyncio"})
    assert str(e.value) == ("--set loop=asyncio: unicorn has no setting loop "
                            "(its settings: preload, yjit, malloc_arena_max, allocator)")
    with pytest.raises(ArenaError, match=r"^--set loop=trio: must be auto or asyncio or uvloop \(uvicorn's loop\)$"):
        catalog.check_settings(CATALOG["uvicorn"], {"loop": "trio"})
    with pytest.raises(ArenaError, match="yjit"):
        catalog.check_settings(CATALOG["gunicorn-sync"], {"yjit": True})  # YJIT is Ruby's
    assert catalog.check_settings(CATALOG["puma"], {"yjit": "on", "preload": "false", "keepalive_timeout": "0"}) == \
        {"preload": False, "keepalive_timeout": 0, "yjit": True}  # typed, in the server's order


def test_the_settings_text_is_the_one_way_a_name_shows_them():
    from arena.plan.experiment import settings_text

    assert settings_text({"preload": True, "max_requests": 500, "loop": "uvloop"}) == \
        "preload=true max_requests=500 loop=uvloop"


def test_a_server_made_of_several_distributions_shows_each_version():
    """gunicorn-uvicorn is gunicorn running uvicorn's worker class: its version is gunicorn's, with the
    worker's and uvicorn's beside it (all three decide what is measured); one missing: not installed."""
    from importlib import metadata

    from arena.servers.catalog import _versions, version

    assert _versions(["gunicorn", "uvicorn-worker", "uvicorn"], ["23.0.0", "0.4.0", "0.32.0"]) == \
        "23.0.0 (uvicorn-worker 0.4.0, uvicorn 0.32.0)"
    assert _versions(["gunicorn", "uvicorn-worker"], ["23.0.0", None]) is None
    assert _versions(["uvicorn"], ["0.32.0"]) == "0.32.0"
    assert version("gunicorn-uvicorn") == (f"{metadata.version('gunicorn')} (uvicorn-worker "
                                           f"{metadata.version('uvicorn-worker')}, uvicorn {metadata.version('uvicorn')})")
