"""The import graph is the data flow: the contracts in pyproject.toml ([tool.importlinter]) hold
(make test runs lint-imports), and reading a figure loads no machinery."""

import subprocess
import sys
from pathlib import Path


def test_reading_the_results_loads_no_runner_server_or_driver():
    code = ("import sys, arena.results.aggregate, arena.results.answer, arena.results.store; "
            "print(sorted(m for m in sys.modules if m.startswith('arena')))")
    loaded = eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    machinery = [m for m in loaded if m.split(".")[1:2] and m.split(".")[1] in
                 ("runner", "servers", "drivers", "probe", "services", "topology", "plan", "model")]
    assert machinery == [], machinery


def test_the_layer_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"  # import-linter's command, in this environment
    done = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "5 kept, 0 broken" in done.stdout
