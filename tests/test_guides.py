"""The guides' commands, run as a reader would: each ```LANG file PATH block of a guide is written to
PATH in a fresh directory, then each ```sh test block's lines run there in order with .venv/bin first
on PATH; every one must exit 0. A block that is plain ```sh is shown, not run (it downloads, or needs
what a test cannot have)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_server

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w+)(?: (file|test)(?: (\S+))?)?\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(guide: Path) -> tuple[dict[str, str], list[str]]:
    """A guide's files (path -> text) and its tested commands, in order."""
    files, commands = {}, []
    for _, kind, path, body in BLOCK.findall(guide.read_text()):
        if kind == "file":
            files[path] = body
        elif kind == "test":
            commands += [line for line in body.splitlines() if line.strip() and not line.startswith("#")]
    return files, commands


def test_the_guide_parser_reads_files_and_tested_commands(tmp_path):
    guide = tmp_path / "g.md"
    guide.write_text("```python file a/b.py\nx = 1\n```\n\n```sh test\narena ls\n# a comment\n```\n\n"
                     "```sh\narena not-run\n```\n")
    assert blocks(guide) == ({"a/b.py": "x = 1\n"}, ["arena ls"])


@pytest.mark.integration
def test_the_own_app_guides_commands_work(tmp_path):
    for server in ("puma", "unicorn", "gunicorn-gthread", "waitress", "uvicorn", "hypercorn", "granian"):
        require_server(server)
    files, commands = blocks(ROOT / "docs" / "own-app.md")
    assert len(files) >= 5 and len(commands) >= 5
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in commands:
        done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        # arena run exits 1 when a run is invalid (a noisy machine's drift): every run made is what the guide promises
        made = command.startswith("arena run") and done.returncode == 1 and " 0 failed;" in done.stdout
        assert done.returncode == 0 or made, f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "most throughput at any latency" in done.stdout  # arena show, last: the answer
