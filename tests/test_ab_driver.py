"""The ab driver against ab's real output (captured from ab 2.3 here: tests/fixtures/ab/)."""

from pathlib import Path

import pytest

from arena import stats
from arena.drivers import ab
from arena.drivers.spec import LoadSpec
from arena.results.load_result import from_dict, to_dict
from arena.errors import ArenaError
from arena.report.summary import load_summary

FIX = Path(__file__).parent / "fixtures" / "ab"


def parsed():
    return ab.parse((FIX / "stdout.txt").read_text(), (FIX / "requests.tsv").read_text(), url="http://x/", connections=4,
                    cpu_s=0.05, wall_s=1.0, config={})


def test_the_report_and_the_per_request_record_are_read():
    r = parsed()
    m = r.measured
    assert (r.tool, r.tool_version, r.model, r.connections) == ("ab", "2.3", "closed", 4)
    assert (m.completed, m.errors, m.duration_s, m.achieved_rps) == (326, 0, 1.004, 324.63)
    assert m.bytes_received == 75199 and m.status == {} and m.server_timing == {}  # ab cannot tell
    assert m.response_time.count == 326 == sum(p.completed for p in r.series)
    # ab's own table says: 50% 5 ms, 90% 15 ms, 100% 81 ms (whole ms); ours, from its -g record:
    # (as the highest value equivalent at 3 significant digits: 5 ms is 5003 us)
    h = m.response_time.decode()  # the encoding is HdrHistogram's, decodable by any library
    assert m.response_time.p("50") == h.get_highest_equivalent_value(5000) == 5003
    assert m.response_time.p("90") == h.get_highest_equivalent_value(15000)
    assert m.response_time.p("100") == m.response_time.max == h.get_highest_equivalent_value(81000)
    assert h.get_total_count() == 326 and stats.hdr_value_at_quantile(h, 0.5) == 5003
    assert r.cpu_per_request_us == pytest.approx(0.05e6 / 326) and r.saturated is False


def test_failures_are_classified():
    r = ab.parse((FIX / "refused.txt").read_text(), "starttime\tseconds\tctime\tdtime\tttime\twait\n", url="u",
                 connections=1, cpu_s=None, wall_s=None, config={})
    assert r.measured.error_counts == {"connect": 0, "receive": 6, "exceptions": 3, "status": 0} and r.measured.errors == 9
    assert r.measured.response_time.count == 0 and r.saturated is None


def test_a_result_round_trips_through_the_store_form():
    r = parsed()
    assert from_dict(to_dict(r)) == r
    assert "Throughput:   324.6 req/s" in load_summary(r)


def test_argv():
    spec = LoadSpec("http://127.0.0.1:8080/work?cpu_ms=1", connections=8, duration_s=3, headers=["A: b"])
    argv = ab.build_argv(spec, 3.0, Path("/t/g.tsv"))
    assert argv[:8] == ["ab", "-q", "-r", "-c", "8", "-s", "30", "-g"] and "-k" in argv
    assert argv[argv.index("-t") + 1] == "3" and argv[-1] == "http://127.0.0.1:8080/work?cpu_ms=1"
    short = ab.build_argv(spec, 0.3, Path("g"))  # ab's -t is whole seconds; 0 would mean no limit
    assert short[short.index("-t") + 1] == "1"
    assert ab.build_argv(LoadSpec("http://h:1", connections=1), 1.0, Path("g"))[-1] == "http://h:1/"
    with pytest.raises(ArenaError, match='driver = "ab": ab has only the closed model'):
        ab.build_argv(LoadSpec("http://h/", rate=10), 1.0, Path("g"))
    with pytest.raises(ArenaError, match="ab: no result in its output"):
        ab.parse("apr_socket_connect(): Connection refused (111)\n", "", url="u", connections=1, cpu_s=None,
                 wall_s=None, config={})


def test_answers_that_are_not_2xx_are_errors_not_completions():
    text = (FIX / "stdout.txt").read_text().replace("Failed requests:        0\n",
                                                        "Failed requests:        0\nNon-2xx responses:      300\n")
    r = ab.parse(text, (FIX / "requests.tsv").read_text(), url="http://x/", connections=4, cpu_s=None, wall_s=None,
                 config={})
    assert r.measured.completed == 26 and r.measured.error_counts["status"] == 300 and r.measured.errors == 300
