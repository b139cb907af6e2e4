"""The JMeter driver: the test plan it writes, and its JTL parser against JMeter's real output
(captured from JMeter 5.6.3 here, run by the driver's own command line on its own test plan:
tests/fixtures/jmeter/), and one short real run."""

import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from arena.drivers import jmeter
from arena.drivers.spec import LoadSpec
from arena.results.load_result import from_dict, to_dict
from arena.errors import ArenaError
from arena.report.summary import load_summary
from tests.conftest import require_server

FIX = Path(__file__).parent / "fixtures" / "jmeter"


def parsed(name="results.jtl", rate=None):
    return jmeter.parse((FIX / name).read_text(), url="http://x/", threads=4, rate=rate, version="5.6.3",
                        cpu_s=1.0, wall_s=4.0, config={})


def test_the_test_plan_is_jmeter_xml_for_the_spec():
    spec = LoadSpec("http://127.0.0.1:8080/work?cpu_ms=1&io_ms=2", connections=8, duration_s=2.5,
                    headers=["X-A: <b>&c"], keep_alive=False)
    root = ET.fromstring(jmeter.test_plan(spec, 2.5))
    props = {e.get("name"): e.text for e in root.iter() if e.get("name")}
    assert props["ThreadGroup.num_threads"] == "8" and props["ThreadGroup.duration"] == "3"  # whole seconds, up
    assert props["HTTPSampler.domain"] == "127.0.0.1" and props["HTTPSampler.port"] == "8080"
    assert props["HTTPSampler.path"] == "/work?cpu_ms=1&io_ms=2"  # escaped in the file, intact when read
    assert props["HTTPSampler.use_keepalive"] == "false" and props["LoopController.loops"] == "-1"
    assert props["Header.name"] == "X-A" and props["Header.value"] == "<b>&c"
    assert root.find(".//ConstantThroughputTimer") is None


def test_a_rate_becomes_a_shared_constant_throughput_timer():
    spec = LoadSpec("http://127.0.0.1:8080/", rate=50, duration_s=2)
    root = ET.fromstring(jmeter.test_plan(spec, 2))
    timer = root.find(".//ConstantThroughputTimer")
    assert timer is not None and timer.find("intProp").text == "4"  # all threads of the group, shared
    assert float(timer.find("doubleProp/value").text) == 3000.0  # JMeter's unit: samples per minute
    assert jmeter.threads_for(spec) == 50 and jmeter.threads_for(LoadSpec("u", rate=5000)) == jmeter.MAX_THREADS


def test_what_the_driver_refuses():
    with pytest.raises(ArenaError, match='driver = "jmeter": this driver runs for a duration'):
        jmeter.test_plan(LoadSpec("http://127.0.0.1:1/", connections=1, requests=100), 1)
    with pytest.raises(ArenaError, match="method PUT is not supported"):
        jmeter.test_plan(LoadSpec("http://127.0.0.1:1/", connections=1, method="PUT"), 1)


def test_the_jtl_is_read():
    r = parsed()
    m = r.measured
    rows = (FIX / "results.jtl").read_text().splitlines()[1:]
    assert (r.tool, r.tool_version, r.model, r.connections) == ("jmeter", "5.6.3", "closed", 4)
    assert m.completed == len(rows) and m.errors == 0 and m.status == {200: len(rows)}
    assert m.response_time.count == len(rows) == sum(p.completed for p in r.series)
    elapsed = sorted(int(line.split(",")[1]) for line in rows)
    # nearest rank on JMeter's whole milliseconds, at HdrHistogram's precision
    h = m.response_time.decode()
    assert m.response_time.p("50") == h.get_highest_equivalent_value(elapsed[(len(elapsed) + 1) // 2 - 1] * 1000)
    assert m.response_time.max == h.get_highest_equivalent_value(elapsed[-1] * 1000)
    assert m.achieved_rps == pytest.approx(m.completed / m.duration_s)
    assert m.bytes_received > 0 and m.bytes_sent > 0 and m.server_timing == {} and m.workers == {}  # no headers in its CSV
    assert r.generator_utilization == pytest.approx(0.25) and r.saturated is False


def test_failures_are_classified_by_jmeter_exception():
    r = parsed("refused.jtl")
    assert r.measured.completed == 0 and r.measured.errors == 50 and r.measured.status == {}
    assert r.measured.error_counts == {"HttpHostConnectException": 50}  # JMeter's own class: the exception
    assert r.measured.response_time.count == 0 and sum(p.errors for p in r.series) == 50
    assert jmeter.error_class("Non HTTP response code: java.net.SocketTimeoutException") == "SocketTimeoutException"
    assert jmeter.error_class("Non HTTP response code: org.apache.http.NoHttpResponseException") == "NoHttpResponseException"


def test_the_version_comes_from_jmeters_log():
    assert jmeter.version_from_log((FIX / "jmeter.log").read_text()) == "5.6.3"


def test_a_result_round_trips_and_summarizes():
    r = parsed(rate=100.0)
    assert from_dict(to_dict(r)) == r
    text = load_summary(r)
    assert text.startswith("jmeter 5.6.3") and "(offered 100.0)" in text


def test_an_empty_or_foreign_jtl():
    header = (FIX / "results.jtl").read_text().splitlines()[0] + "\n"
    assert jmeter.parse(header, url="u", threads=1, rate=None, version=None, cpu_s=None, wall_s=None,
                        config={}).measured.completed == 0
    with pytest.raises(ArenaError, match="no results in its JTL"):
        jmeter.parse("", url="u", threads=1, rate=None, version=None, cpu_s=None, wall_s=None, config={})
    with pytest.raises(ArenaError, match="has no elapsed, responseCode, success, timeStamp column"):
        jmeter.parse("<testResults>\n", url="u", threads=1, rate=None, version=None, cpu_s=None, wall_s=None,
                     config={})


@pytest.mark.integration
def test_a_short_real_run():
    require_server("puma")
    if not (jmeter.home() / "bin" / "ApacheJMeter.jar").exists() or not shutil.which("java"):
        if os.environ.get("ARENA_REQUIRE_ALL") == "1":
            pytest.fail(f"JMeter is not assembled in {jmeter.home()} (make install)")
        pytest.skip("JMeter is not assembled (make install)")
    from arena.servers.launch import ServerSpec, start

    with start(ServerSpec("puma", "rack", processes=1, threads=4, cpus=[1])) as server:
        r = jmeter.run(LoadSpec(f"{server.url}/work?cpu_ms=1", connections=2, duration_s=1.0), cpus=[0])
    assert r.measured.completed > 20 and r.measured.errors == 0 and r.measured.status == {200: r.measured.completed}
    assert r.tool_version and r.generator_cpu_s > 0
