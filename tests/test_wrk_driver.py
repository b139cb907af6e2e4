"""The wrk driver against wrk's real output (captured from Debian's wrk 4.1.0 here)."""

import json
from pathlib import Path

import pytest

from arena.drivers import wrk
from arena.drivers.spec import LoadSpec
from arena.results.load_result import from_dict, to_dict
from arena.errors import ArenaError
from arena.report.summary import load_summary

FIX = Path(__file__).parent / "fixtures" / "wrk" / "stdout.txt"


def test_the_done_hook_gives_exact_figures():
    text = FIX.read_text()
    exact = json.loads(next(ln for ln in text.splitlines() if ln.startswith(wrk.MARK))[len(wrk.MARK):])
    r = wrk.parse(text, url="u", connections=4, cpu_s=0.02, wall_s=1.0, config={"version": "wrk debian/4.1.0-3+b2 [epoll]"})
    m = r.measured
    assert (r.tool, r.tool_version, r.model) == ("wrk", "4.1.0", "closed")
    assert m.completed == exact["requests"] and m.bytes_received == exact["bytes"]
    assert m.achieved_rps == pytest.approx(exact["requests"] / (exact["duration_us"] / 1e6))
    assert m.response_time.p("50") == exact["latency"]["percentiles"]["50"]
    assert m.response_time.p("100") == m.response_time.max == exact["latency"]["max"]  # not wrk's 0
    assert m.response_time.hdr is None and r.series == [] and m.connect_time is None  # wrk cannot give them
    assert m.error_counts == {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0}
    # the text report agrees (wrk prints the rounded figures)
    assert f"{exact['requests']} requests in" in text
    assert from_dict(to_dict(r)) == r and "Throughput:" in load_summary(r)


def test_argv_and_refusals():
    argv = wrk.build_argv(LoadSpec("http://127.0.0.1:1/x", connections=8, duration_s=2.5, headers=["A: b"]), 2.5, Path("s.lua"))
    assert argv[:8] == ["wrk", "-t", "1", "-c", "8", "-d", "3s", "--timeout"] and argv[-3:] == ["-H", "A: b", "http://127.0.0.1:1/x"]
    for spec, message in ((LoadSpec("http://h/", rate=5), "wrk has only the closed model"),
                          (LoadSpec("http://h/", requests=5), "not a request count"),
                          (LoadSpec("http://h/", method="POST"), "keep-alive GET requests only")):
        with pytest.raises(ArenaError, match=message):
            wrk.build_argv(spec, 1, Path("s.lua"))
    with pytest.raises(ArenaError, match=r"^wrk: no result in its output \(unable to connect"):
        wrk.parse("unable to connect to 127.0.0.1:9 Connection refused\n", url="u", connections=1, cpu_s=None,
                  wall_s=None, config={})


def test_a_real_run_is_refused_cleanly_when_nothing_listens():
    with pytest.raises(ArenaError, match="^wrk: unable to connect"):
        wrk.run(LoadSpec("http://127.0.0.1:9/", connections=1, duration_s=1))


def test_answers_that_are_not_2xx_or_3xx_are_errors_not_completions():
    text = FIX.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith(wrk.MARK))
    d = json.loads(line[len(wrk.MARK):])
    d["errors"]["status"] = d["requests"] - 10
    r = wrk.parse(text.replace(line, wrk.MARK + json.dumps(d)), url="u", connections=1, cpu_s=None, wall_s=None,
                  config={})
    assert r.measured.completed == 10 and r.measured.error_counts["status"] == d["requests"] - 10
