"""The guides' commands, run as a reader would: each ```LANG file PATH block of a guide is written to
PATH in a fresh directory (which also holds `examples`, the checkout's), then each ```sh test block's
lines run there in order with .venv/bin first on PATH; every one must exit 0 (or the status its
`# exit: N` line names), and print what each `# expect: TEXT` line after it says. A ```sh by TEST
block is run by that test file instead, which asserts more of it than a guide's run can (the
guide's run would make the same runs again). A block that is plain ```sh is shown, not run (it
downloads, or needs what a test cannot have). Processes a guide
starts in the background write their pid to a .pid file; whatever is left of them is stopped, and
what they leave in their temporary directory (TMPDIR, one of the test's own) is removed with it."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import require_server

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```(\w+)(?: (file|test|by)(?: (\S+))?)?\n(.*?)^```$", re.MULTILINE | re.DOTALL)

# Each guide with tested commands, and the servers they start.
GUIDES = {
    "own-app.md": ("puma", "unicorn", "gunicorn-gthread", "waitress", "uvicorn", "hypercorn", "granian"),
    "rails-django.md": ("puma", "gunicorn-gthread"),
    "processes-threads.md": ("gunicorn-gthread",),
    "capacity.md": ("gunicorn-gthread",),
    "ci.md": ("gunicorn-gthread",),
    "scale.md": ("gunicorn-gthread",),
}


@dataclass
class Step:
    command: str
    status: int = 0
    expect: list[str] = field(default_factory=list)


def _steps(body: str) -> list[Step]:
    """A block's commands, each with the exit status and the texts its comment lines expect of it."""
    steps: list[Step] = []
    for line in body.splitlines():
        if line.startswith("# expect: "):
            steps[-1].expect.append(line.removeprefix("# expect: "))
        elif line.startswith("# exit: "):
            steps[-1].status = int(line.removeprefix("# exit: "))
        elif line.strip() and not line.startswith("#"):
            steps.append(Step(line))
    return steps


def blocks(guide: Path) -> tuple[dict[str, str], list[Step]]:
    """A guide's files (path -> text) and its tested commands, in order."""
    files, steps = {}, []
    for _, kind, path, body in BLOCK.findall(guide.read_text()):
        if kind == "file":
            files[path] = body
        elif kind == "test":
            steps += _steps(body)
    return files, steps


def run_by(guide: Path, test: str) -> list[Step]:
    """The commands of ``guide``'s ```sh by TEST blocks that name ``test`` (a file of tests/), in order."""
    return [step for _, kind, path, body in BLOCK.findall(guide.read_text()) if kind == "by" and path == test
            for step in _steps(body)]


def reader_env(**extra: str) -> dict[str, str]:
    """The environment a guide's commands run in, as a reader's: this checkout's venv first on PATH, no
    ARENA_STORE of the tests', and ``extra`` (COLUMNS, TMPDIR)."""
    env = {k: v for k, v in os.environ.items() if k != "ARENA_STORE"}
    return env | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}


def run_step(step: Step, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``step``'s command run by the shell in ``cwd``; it must exit with the status the guide names and
    print each text it expects (on standard output or error). ``arena run`` may exit 1 where every run
    was made: a run the noisy machine made invalid (a drift) is still what the guide promises."""
    done = subprocess.run(step.command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    said = done.stdout + done.stderr
    made = step.command.startswith("arena run") and done.returncode == 1 and " 0 failed;" in done.stdout
    assert done.returncode == step.status or made, \
        f"{step.command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    for text in step.expect:
        assert text in said, f"{step.command}: {text!r} not in\n{said[-3000:]}"
    return done


def test_the_guide_parser_reads_files_and_tested_commands(tmp_path):
    guide = tmp_path / "g.md"
    guide.write_text("```python file a/b.py\nx = 1\n```\n\n```sh test\narena ls\n# a comment\n# expect: runs\n"
                     "arena show x\n# exit: 2\n```\n\n```sh\narena not-run\n```\n")
    assert blocks(guide) == ({"a/b.py": "x = 1\n"}, [Step("arena ls", 0, ["runs"]), Step("arena show x", 2)])
    guide.write_text(guide.read_text() + "```sh by test_x.py\narena tune\n# what it does\n# expect: chosen\narena ls\n```\n")
    assert run_by(guide, "test_x.py") == [Step("arena tune", 0, ["chosen"]), Step("arena ls")]
    assert run_by(guide, "test_y.py") == []
    assert blocks(guide)[1] == [Step("arena ls", 0, ["runs"]), Step("arena show x", 2)]


def test_every_guide_is_run_and_listed_in_the_index():
    tested = {p.name for p in DOCS.glob("*.md") if "```sh test" in p.read_text()}
    assert tested == set(GUIDES)
    index = (DOCS / "README.md").read_text()
    assert all(f"({name})" in index for name in GUIDES)


def test_every_block_a_guide_leaves_to_a_test_is_run_by_it():
    """A ```sh by TEST block names a test file that reads that guide's blocks for it (run_by)."""
    left = {(page.name, path) for page in DOCS.glob("*.md")
            for _, kind, path, _ in BLOCK.findall(page.read_text()) if kind == "by"}
    assert left, "no guide leaves a block to a test"
    for name, test in left:
        text = (ROOT / "tests" / test).read_text()
        assert f'run_by(DOCS / "{name}", "{test}")' in text, (name, test)


def _stop_background(where: Path) -> None:
    pids = [int(p.read_text().split()[0]) for p in where.glob("*.pid") if p.read_text().strip()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# The guides whose expectations hold beside another test (they name configurations, not figures)
BESIDE = {"scale.md"}


@pytest.mark.integration
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in BESIDE else pytest.mark.alone) for n in sorted(GUIDES)])
def test_a_guides_commands_work(name, tmp_path):
    for server in GUIDES[name]:
        require_server(server)
    files, steps = blocks(DOCS / name)
    assert steps
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    # what the commands leave in their temporary directory goes with it (as /tmp, every user may enter
    # it: PostgreSQL runs as its own; pytest's directory is root's alone)
    tmp = Path(tempfile.mkdtemp(prefix="arena-guide-"))
    tmp.chmod(0o1777)
    env = reader_env(COLUMNS="160", TMPDIR=str(tmp))
    try:
        for step in steps:
            run_step(step, tmp_path, env)
    finally:
        _stop_background(tmp_path)
        shutil.rmtree(tmp, ignore_errors=True)


def test_every_relative_link_of_the_docs_leads_to_a_file():
    """The README, the guides, the reference and the benches' page link each other and the code:
    a page moved or renamed leaves no dead link behind."""
    pages = [ROOT / "README.md", ROOT / "benches" / "README.md", *DOCS.rglob("*.md")]
    dead = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"(https?:|mailto:|#)", target):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                dead.append(f"{page.relative_to(ROOT)}: {target}")
    assert len(pages) > 15 and dead == [], dead


def test_the_rules_page_holds_the_rules_as_the_code_states_them():
    """docs/reference/validity.md's table is written from the rules (tools/rules-doc): a rule added,
    reworded or given another default shows there, or this fails."""
    from arena.plan.parse import VALIDITY_DEFAULTS
    from arena.report.formats.markdown import rules_table

    page = (DOCS / "reference" / "validity.md").read_text()
    table = rules_table(VALIDITY_DEFAULTS)
    assert table.count("\n") == 16 and "| errors | errors (transport errors" in table
    assert f"-->\n{table}\n<!-- /rules -->" in page, "run tools/rules-doc"
