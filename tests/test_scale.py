"""Reading a store grows linearly with its runs: the work of show and of the report's data on a store
of 1,600 runs over 800 configurations against one of 200 over 100 (tests/stores.py), counted in the
Python calls it makes (every function call, C functions and generator resumptions included), not
timed: 8 times the runs take about 8 times the calls; a step that compares every cell with every
other (as the Pareto front once did) takes 64. The times themselves are benches/store_scale.py's."""

import sys

from arena.app.analysis import analyse
from arena.app.storage import results
from arena.model.verify import compare
from arena.report import charts, data
from arena.report.text_table import text_table
from arena.results.store import Store
from tests.stores import grow


def _calls(work) -> int:
    made = 0

    def count(frame, event, arg):
        nonlocal made
        if event in ("call", "c_call"):
            made += 1

    sys.setprofile(count)
    try:
        work()
    finally:
        sys.setprofile(None)
    return made


def _read(path) -> None:
    """What arena show does, and the report's data but for the simulator (a constant dozen cells)."""
    with Store(path, readonly=True) as s:
        res = results(s, "tiny-grid")
    answers = analyse(res).answers
    text_table(data.comparison_table(res.cells), "t", 150)
    shown = data.charted(answers, res.cells)
    compare(res.cells, res.observations())
    charts.all_charts(res.cells, res.runs, shown)


def test_reading_a_store_grows_linearly_with_its_runs(tmp_path):
    small, big = tmp_path / "small.db", tmp_path / "big.db"
    grow(small, 200, 100)
    grow(big, 1600, 800)
    _read(small)  # imports and first-use caches out of the count
    ratio = _calls(lambda: _read(big)) / _calls(lambda: _read(small))
    assert 6 < ratio < 12, ratio
