"""The servers are optional: the core package installs from the lock without them, its analysis
commands work there, and `arena servers` says which servers are missing and how to add them."""

import json
import os
import re
import socket
import subprocess
import time
import tomllib
from pathlib import Path

import jsonschema
import pytest

from arena.servers import catalog
from tests.conftest import report_store

ROOT = Path(__file__).resolve().parents[1]
UV = ROOT / ".tools" / "bin" / "uv"


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower().replace("_", "-") for r in requirements}


def _extra(project: dict, name: str) -> set[str]:
    """The distributions an extra installs, with the extras of Arena's own that it names (arena[demo])."""
    names = set()
    for r in project["optional-dependencies"][name]:
        own = re.fullmatch(r"arena\[([\w-]+)\]", r)
        names |= _extra(project, own.group(1)) if own else _names([r])
    return names


def test_every_python_server_is_in_the_extra_and_none_in_the_core():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core, extra = _names(project["dependencies"]), _extra(project, "python-servers")
    dists = {s.version[1].lower() for s in catalog.CATALOG.values() if s.version[0] == "dist"}
    assert dists and dists <= extra, dists - extra
    assert not dists & core and "distributed" not in core
    assert "distributed" in _names(project["optional-dependencies"]["cluster"])
    assert all(s.install_hint.startswith(catalog.PIP) for s in catalog.CATALOG.values() if s.version[0] == "dist")


@pytest.mark.integration
def test_the_core_installs_without_servers_and_its_commands_work(tmp_path):
    """From the lock, offline (the wheels `make install` cached): no server, no Dask; `arena servers`
    says so with the extra to install; compare and show read a store."""
    env = dict(os.environ, UV_PROJECT_ENVIRONMENT=str(tmp_path / "core"), UV_PYTHON_DOWNLOADS="never")
    sync = subprocess.run([str(UV), "sync", "-q", "--locked", "--no-dev", "--offline", "--no-editable",
                           "--python", str(ROOT / ".venv" / "bin" / "python")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert sync.returncode == 0, sync.stderr
    bin_dir = tmp_path / "core" / "bin"
    for module in ("gunicorn", "uvicorn", "granian", "waitress", "flask", "httpx", "distributed"):
        probe = subprocess.run([str(bin_dir / "python"), "-c", f"import {module}"], capture_output=True, text=True)
        assert probe.returncode == 1 and "No module named" in probe.stderr, module

    def arena(*argv):
        return subprocess.run([str(bin_dir / "arena"), *argv], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env=dict(os.environ, COLUMNS="200"))

    assert re.fullmatch(r"arena \S+\n", arena("--version").stdout)
    listed = arena("servers", "--json")
    doc = json.loads(listed.stdout)
    jsonschema.Draft202012Validator(json.loads((ROOT / "schemas" / "servers.schema.json").read_text())).validate(doc)
    python = {s["name"]: s for s in doc["servers"] if s["language"] == "python"}
    assert python["wsgiref"]["available"]  # the standard library's
    missing = [s for name, s in python.items() if name != "wsgiref"]
    assert missing and all(not s["available"] and s["install"].startswith(catalog.PIP) for s in missing)
    assert doc["how_to_add"]["python"] == catalog.PIP
    assert "Installed: " in arena("servers").stdout and "arena[python-servers]" in arena("servers").stdout
    compared = arena("compare", "tiny-grid", "tiny-grid", "--store", report_store(), "--format", "json")
    assert compared.returncode == 0, compared.stderr
    assert arena("show", "tiny-grid", "--store", report_store()).returncode == 0
    cluster = arena("load", "http://127.0.0.1:9/", "-d", "1s", "--cluster", "tcp://127.0.0.1:9")
    assert cluster.returncode == 2 and "pip install 'arena[cluster]'" in cluster.stderr, cluster.stderr

    # arena load from the installed package: its schema is in the wheel, arena-load is named by ARENA_LOAD_BIN
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    static = subprocess.Popen([str(bin_dir / "python"), "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        out = tmp_path / "load.json"
        loaded = subprocess.run([str(bin_dir / "arena"), "load", f"http://127.0.0.1:{port}/", "-d", "1s", "-c", "2",
                                 "--json", str(out)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                                env=dict(os.environ, ARENA_LOAD_BIN=str(ROOT / "target" / "release" / "arena-load")))
        assert loaded.returncode == 0, loaded.stdout + loaded.stderr
        assert json.loads(out.read_text())["measured"]["requests"]["completed"] > 0
    finally:
        static.terminate()
        static.wait(timeout=10)
    assert list((tmp_path / "core" / "lib").glob("python3*/site-packages/arena/schemas/experiment.schema.json"))


def test_the_demo_checks_the_servers_and_apps_its_experiment_runs():
    """make demo checks DEMO_SERVERS on rack, wsgi and asgi before it runs scenarios/quick.toml: the
    same servers, each serving one of those apps (a server added to the demo is checked too)."""
    from arena.plan.parse import load_experiment

    make = (ROOT / "Makefile").read_text()
    listed = re.search(r"^DEMO_SERVERS := (.+)$", make, re.M).group(1).split()
    exp = load_experiment(ROOT / "scenarios" / "quick.toml")
    assert sorted(listed) == sorted({c.server for c in exp.servers})
    checked = set(re.findall(r"--app (\w+)", make[make.index("\ndemo:"):]))
    assert {c.app for c in exp.servers} <= checked == {"rack", "wsgi", "asgi"}
    # and make demo installs them, and no other server: their Debian packages, and the extra "demo"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    apt = set(re.search(r"^DEMO_APT_PACKAGES := (.+)$", make, re.M).group(1).split())
    kinds = {catalog.CATALOG[s].version[0] for s in listed}
    assert kinds == {"cmd", "dist"}
    assert {catalog.CATALOG[s].install_hint.split()[-1] for s in listed if catalog.CATALOG[s].version[0] == "cmd"} <= apt
    assert {catalog.CATALOG[s].version[1] for s in listed if catalog.CATALOG[s].version[0] == "dist"} == \
        _extra(project, "demo")
