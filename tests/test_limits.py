"""Limits as deployed: a container's CPU quota and memory limit on a server's process set."""

import os
import subprocess
import sys

import pytest

from tests.conftest import require_server

QUOTA = """
name = "quota"
duration = "2s"
warmup = "500ms"
repetitions = 1
[workload]
path = "/work?cpu_ms=5&io_ms=2"
[load]
concurrency = [4]
[layout]
server_cpus = "1"
load_cpus = "0"
[[servers]]
server = "puma"
processes = 2
threads = 4
cpu_limit = [0.5, "none"]
"""


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
