"""The siege driver against siege's real output (captured from siege 4.0.7 here, against puma with
keep-alive: siege then reports read errors, which must be counted)."""

from pathlib import Path

import pytest

from arena.drivers import siege
from arena.drivers.spec import LoadSpec
from arena.results.load_result import from_dict, to_dict
from arena.errors import ArenaError

FIX = Path(__file__).parent / "fixtures" / "siege" / "stdout.txt"


def test_the_json_summary_is_read():
    r = siege.parse(FIX.read_text(), url="u", connections=4, cpu_s=0.01, wall_s=0.6, config={"version": "4.0.7"})
    m = r.measured
    assert (r.tool, r.tool_version, r.model) == ("siege", "4.0.7", "closed")
    assert (m.completed, m.errors, m.error_counts, m.duration_s, m.achieved_rps) == (243, 23, {"failed": 23}, 0.61, 398.36)
    rt = m.response_time
    assert (rt.count, rt.min, rt.max, rt.mean) == (243, 0, 70_000, 10_000)  # siege's 10 ms resolution
    assert rt.percentiles == {} and rt.hdr is None and r.series == []  # siege cannot give them
    assert m.bytes_received == round(0.46 * 2**20)
    assert from_dict(to_dict(r)) == r


def test_argv_and_refusals(tmp_path):
    argv = siege.build_argv(LoadSpec("http://127.0.0.1:1/x", connections=8, headers=["A: b"]), 2.2, tmp_path / "rc")
    assert argv == ["siege", "-R", str(tmp_path / "rc"), "-b", "-j", "-c", "8", "-t", "3S", "-H", "A: b", "http://127.0.0.1:1/x"]
    # a request count is repetitions per user (siege -r), rounded up to a multiple of the users
    by_count = siege.build_argv(LoadSpec("http://127.0.0.1:1/x", connections=30, requests=600), None, tmp_path / "rc")
    assert by_count[5:9] == ["-c", "30", "-r", "20"]
    assert siege.build_argv(LoadSpec("http://h/", connections=30, requests=601), None, tmp_path / "rc")[8] == "21"
    with pytest.raises(ArenaError, match="siege has only the closed model"):
        siege.build_argv(LoadSpec("http://h/", rate=3), 1, tmp_path / "rc")
    with pytest.raises(ArenaError, match=r"^siege: no result in its output \(\[error\] descriptor table full"):
        siege.parse("[error] descriptor table full\n", url="u", connections=1, cpu_s=None, wall_s=None, config={})


def test_a_tool_past_its_stop_time_is_asked_to_stop_and_its_report_kept():
    """A request-bounded siege run that outlives its bound gets SIGINT (siege's Ctrl-C: it stops and
    prints its report), not a kill: what it did is read, and the run says it was stopped."""
    import sys

    from arena.drivers.external import run_tool

    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGINT, lambda *a: (print('report: 66 done', flush=True), sys.exit(0)))\n"
              "time.sleep(30)\n")
    done = run_tool("fake", [sys.executable, "-c", script], cpus=None, limit_s=20, install="-", stop_s=0.5)
    assert done.stopped and "report: 66 done" in done.stdout and done.wall_s < 10
    quick = run_tool("fake", [sys.executable, "-c", "print('all done')"], cpus=None, limit_s=20, install="-", stop_s=10)
    assert not quick.stopped and quick.stdout.strip() == "all done"
