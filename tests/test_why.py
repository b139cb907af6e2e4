"""Why a configuration is slow: each detector against a real reproduction of its pathology, with a
healthy control that must not trigger it, and none on healthy stores."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_server
from tests.test_guides import DOCS, run_by

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "why"  # the reproductions (docs/why.md)


def found_in(tmp_path, example: str, exits: tuple[int, ...] = (0,), retake: bool = False) -> tuple[list[dict], str]:
    """Run examples/why/EXAMPLE.toml into a fresh store (``retake``: then once more with
    --retake-invalid, as a user would for a run the machine spoiled); what show --json names, and the
    store."""
    store = str(tmp_path / f"{example}.db")
    run = [sys.executable, "-m", "arena", "run", str(EXAMPLES / f"{example}.toml"), "--store", store]
    ran = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode in exits, ran.stdout + ran.stderr
    if retake and ran.returncode:
        ran = subprocess.run([*run, "--retake-invalid"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert ran.returncode in exits, ran.stdout + ran.stderr
    shown = subprocess.run([sys.executable, "-m", "arena", "show", example, "--store", store, "--json"],
                           capture_output=True, text=True, timeout=60, check=True)
    return json.loads(shown.stdout)["why"]["found"], store


@pytest.mark.alone
def test_nagle_with_delayed_ack_is_named_for_uvicorns_workers_and_not_for_one(tmp_path):
    """A five-line ASGI app that sends its headers and its body in two messages, under uvicorn on
    asyncio and h11 at one client: with two workers uvicorn binds the listener itself with proto 0,
    asyncio leaves TCP_NODELAY off on what it accepts, and each request waits ~40 ms for the client's
    delayed ACK. show names it for p=2 (confirmed from the sockets, with its cost and the upstream
    issue) and for p=1 nothing."""
    require_server("uvicorn")
    # 1: the healthy p=1's 2 s at 1,700 req/s was once flagged as drifting on this noisy machine; the
    # calibration below needs a valid run of it, so one spoiled is retaken
    found, store = found_in(tmp_path, "nagle", (0, 1), retake=True)
    assert [(f["key"], f["label"]) for f in found] == [("nagle", "uvicorn[twomsg:app] p=2 loop=asyncio http=h11")], found
    (f,) = found
    assert 35 <= f["effect_p50_ms"] <= 50 and f["throughput_lost"] > 100, f
    assert f["confidence"].startswith("confirmed: ") and "TCP_NODELAY off" in f["confidence"], f
    assert f["reference"] == "https://github.com/Kludex/uvicorn/issues/3149"
    text = subprocess.run([sys.executable, "-m", "arena", "show", "nagle", "--store", store], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "300"}, check=True).stdout
    assert "Nagle's algorithm x delayed ACK (TCP_NODELAY off)" in text and "uvicorn/issues/3149" in text, text
    # docs/why.md's block is these two commands (into its own store), and its show says what it expects
    ran, shown = run_by(DOCS / "why.md", "test_why.py")
    assert ran.command.startswith("arena run examples/why/nagle.toml ") and shown.command.startswith("arena show nagle ")
    assert shown.expect and all(t in text for t in shown.expect), (shown.expect, text)
    # the model learns the server's work from the healthy cell alone, and the report says the stall's share
    from arena.app.analysis import analyses
    from arena.app.predict import calibration
    from arena.report.data import explained

    (a,) = analyses(store, "nagle")
    assert calibration(a.results, "uvicorn").outside_ms.median < 5  # with p=2's runs in: about 22 ms
    (said,) = explained(a.findings().points, a.why)
    assert said.startswith("uvicorn[twomsg:app] p=2 loop=asyncio http=h11 at c=1: the model's p99 ") and \
        "ms of it is Nagle's algorithm x delayed ACK (TCP_NODELAY off): without it, " in said, said
    # arena predict says the same of the configuration it predicts, and its JSON the p99 without it
    ask = [sys.executable, "-m", "arena", "predict", "nagle", "--store", store, "--server", "uvicorn", "--processes"]
    told = subprocess.run([*ask, "2", "--concurrency", "1"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "300"}, check=True).stdout
    assert "explained: uvicorn" in told and said.split(" at c=1: ")[1] in told.replace("\n", ""), told
    (row,) = json.loads(subprocess.run([*ask, "2", "--concurrency", "1", "--json"], capture_output=True, text=True,
                                       timeout=60, check=True).stdout)["rows"]
    (e,) = row["explained"]
    assert e["key"] == "nagle" and e["measured_p99_without_ms"] == pytest.approx(row["measured_p99_ms"] - e["effect_p99_ms"])
    (healthy,) = json.loads(subprocess.run([*ask, "1", "--concurrency", "1", "--json"], capture_output=True, text=True,
                                           timeout=60, check=True).stdout)["rows"]
    assert healthy["explained"] == []


@pytest.mark.alone
def test_connection_churn_is_named_where_the_server_closes_kept_alive_connections(tmp_path):
    """gunicorn's gthread worker with a keep-alive of 0 closes each connection after one answer while
    the clients ask to keep them: one connection a request, named; its default 2 s keeps them."""
    require_server("gunicorn-gthread")
    (f,), _ = found_in(tmp_path, "churn")
    assert (f["key"], f["label"]) == ("churn", "gunicorn-gthread[wsgi] p=1 t=4 keepalive_timeout=0"), f
    share = next(e["value"] for e in f["evidence"] if e["what"] == "connections opened per request")
    assert share > 0.9 and f["effect_p50_ms"] > 0 and "keepalive_timeout (gunicorn --keep-alive" in f["fix"], f


@pytest.mark.integration
def test_a_worker_killed_at_its_timeout_is_named_with_the_servers_own_words(tmp_path):
    """A request that waits 1.5 s under gunicorn's --timeout 1: the master kills the sync worker and
    starts another; the finding says so with the log's WORKER TIMEOUT line. Under 30 s: nothing, and
    the sync worker closing each connection by design is no churn."""
    require_server("gunicorn-sync")
    (f,), _ = found_in(tmp_path, "timeout", (1,))  # 1: the killed worker's requests failed, the run invalid
    assert (f["key"], f["label"]) == ("restarts", "gunicorn-sync[wsgi] p=2 worker_timeout=1"), f
    assert "gunicorn's worker timeout" in f["name"] and "WORKER TIMEOUT (pid:" in f["confidence"], f
    assert f["evidence"][0]["what"] == "workers replaced" and f["evidence"][0]["value"] >= 1, f


@pytest.mark.integration
def test_a_listen_queue_overflow_is_named_with_the_connects_that_waited_a_retransmit(tmp_path):
    """One gunicorn sync worker with a backlog of 1 and 32 clients that connect for every request:
    the kernel drops SYNs at the full accept queue (ListenOverflows) and connects wait ~1 s for the
    retransmit; with gunicorn's default backlog, nothing."""
    require_server("gunicorn-sync")
    (f,), _ = found_in(tmp_path, "backlog", (0, 1), retake=True)  # 1: a run the noisy machine spoiled, retaken
    assert (f["key"], f["label"]) == ("backlog", "gunicorn-sync[wsgi] p=1 options='--backlog 1'"), f
    figures = {e["what"]: e["value"] for e in f["evidence"]}
    assert figures["overflows"] > 0 and figures["connect time max"] >= 900, f
    assert "SYN retransmit" in f["confidence"] and f["effect_p99_ms"] >= 900, f


@pytest.mark.integration
def test_gc_pauses_are_named_where_full_collections_stop_the_requests(tmp_path):
    """Two WSGI apps under gunicorn gthread: heavy keeps half of its 10,000 lists a request a while,
    so full collections walk a 300,000-object heap, and Arena's timing reports the collector's time on
    the requests that met one; light makes as many objects the collector does not track: nothing."""
    require_server("gunicorn-gthread")
    (f,), _ = found_in(tmp_path, "gc", (0, 1))  # 1: a run the pauses made drift, flagged so
    assert (f["key"], f["label"]) == ("gc", "gunicorn-gthread[gcapp:heavy] p=1 t=2"), f
    figures = {e["what"]: e["value"] for e in f["evidence"]}
    assert figures["requests that met a collection"] >= 1 and figures["their GC time p99"] >= 5, f
    assert "gc.freeze()" in f["fix"] and f["effect_p99_ms"] >= 5, f


def test_healthy_stores_name_no_pathology():
    """The fixture stores' cells (healthy runs of Arena's subject apps) trigger no detector."""
    from arena.app.analysis import analyses
    from tests.conftest import report_store

    for a in analyses(report_store()):
        assert a.why.found == (), [f.line for f in a.why.found]


@pytest.mark.alone
def test_event_loop_blocking_is_named_where_a_call_holds_the_loop_and_not_where_it_yields(tmp_path):
    """Arena's ASGI subject under one uvicorn process at 4 clients: a 20 ms wait that holds the event
    loop (io=block) makes every other request wait behind it, and the subject reports that wait
    (Server-Timing loop); the same wait with asyncio.sleep (io=sleep) is named nothing."""
    require_server("uvicorn")
    (f,), _ = found_in(tmp_path, "loop")
    assert (f["key"], f["label"], f["workload"]) == ("loop", "uvicorn[asgi] p=1", "block"), f
    figures = {e["what"]: e["value"] for e in f["evidence"]}
    # four clients, one 21 ms request at a time: each waits for about two others' blocking calls
    assert figures["requests that waited behind a blocked loop"] >= 50, f
    assert 20 <= figures["wait per request"] <= 80 and figures["their wait p99"] >= 40, f
    assert "asyncio.to_thread" in f["fix"] and "asyncio-dev" in f["reference"], f


def test_the_answer_schema_names_every_detector():
    """show --json's why.found keys: the schema's enum is the detectors' own keys, no more, no fewer."""
    from arena.results.why.diagnose import DETECTORS

    def enums(node):
        if isinstance(node, dict):
            if isinstance(node.get("key"), dict) and "enum" in node["key"]:
                yield node["key"]["enum"]
            for v in node.values():
                yield from enums(v)
        elif isinstance(node, list):
            for v in node:
                yield from enums(v)

    schema = json.loads((Path(__file__).resolve().parents[1] / "schemas" / "answer.schema.json").read_text())
    assert list(enums(schema)) == [[d.KEY for d in DETECTORS]]


@pytest.mark.alone
def test_keep_alive_unfairness_is_named_for_puma_and_not_for_gthread(tmp_path):
    """200 kept-alive clients on one process of 8 threads: Puma 5 serves the connections it already
    holds first and closes busy ones after 10 requests, so a reconnecting client waits seconds while
    the others are answered in tens of milliseconds; gunicorn gthread's clients all wait alike."""
    require_server("puma")
    require_server("gunicorn-gthread")
    found, _ = found_in(tmp_path, "keepalive", (0, 1), retake=True)  # a run the machine spoiled is retaken
    assert [(f["key"], f["label"]) for f in found] == [("keepalive", "puma[rack] p=1 t=8")], found
    (f,) = found
    figures = {e["what"]: e["value"] for e in f["evidence"]}
    assert figures["the worst tenth's own p99"] >= 4 * figures["those served first: median p99"], f
    assert figures["those served first"] >= 2, f  # kept alive: served one request after another
    assert f["effect_p99_ms"] >= 500 and "puma/issues/3487" in f["reference"] and "6.5" in f["fix"], f


def test_the_guide_has_a_section_per_detector_and_each_reproduction_it_names_is_run_by_a_test():
    """docs/why.md: one section per detector, and the experiment each one says reproduces it is a file
    of examples/why that a test runs for real (here, test_limits or the guide's own test block)."""
    import re

    from arena.results.why.diagnose import DETECTORS

    root = Path(__file__).resolve().parents[1]
    guide = (root / "docs" / "why.md").read_text()
    sections = re.findall(r"^## (.+)$", guide, re.MULTILINE)
    assert len(sections) == len(DETECTORS), sections
    named = re.findall(r"arena run examples/why/(\w+)\.toml", guide)
    assert len(set(named)) == len(DETECTORS), named
    tests = "".join(p.read_text() for p in (root / "tests").glob("test_*.py"))
    for name in named:
        assert (EXAMPLES / f"{name}.toml").is_file(), name
        assert f'found_in(tmp_path, "{name}"' in tests or f"{name}.toml" in tests.replace("/", " "), name


def test_keep_alive_unfairness_needs_connections_kept_alive_and_a_wide_gap():
    """The detector's rule on known spreads: Puma's (6.6 s for the worst tenth, 49 ms for the others,
    nine requests each; or 6.3 s against 32 ms for the fastest quarter where most are starved) is
    unfair; a server that closes every connection (one request each: a full listen queue's
    retransmits make some slow), a narrow spread and a fair one of few varied answers are not."""
    from dataclasses import replace

    from arena.results.load_result import ConnectionSpread
    from arena.results.why.keepalive import _unfair

    assert _unfair(ConnectionSpread(269, 6_684_671, 49_151, 1.0, 9))
    assert not _unfair(ConnectionSpread(300, 3_000_000, 20_000, 1.0, 1))  # nothing kept alive
    assert not _unfair(ConnectionSpread(200, 917_503, 884_735, 6.0, 6))  # gthread: every client alike
    assert not _unfair(ConnectionSpread(8, 6_684_671, 49_151, 1.0, 9))  # too few connections to tell
    assert not _unfair(ConnectionSpread(50, 45_000, 10_000, 1.0, 9))  # 4.5 times, but 35 ms apart
    # Puma starving most of its connections (454 of 200 clients, each reconnect waiting seconds): the
    # rest's median is a starved one (5.2 s), the fastest quarter is served in 32 ms
    starved = ConnectionSpread(454, 6_291_455, 5_242_879, 10.0, 9, 0, 31_743, 9)
    assert _unfair(starved) and not _unfair(replace(starved, fastest_p99_us=None))
    assert not _unfair(replace(starved, fastest_requests=1))  # the fastest closed after one request each
    # a fair server whose answers vary: each connection's p99 is the most of its few answers, so its
    # fastest quarter sits well below its worst tenth (exponential, 100 ms mean, 2 requests each: the
    # maxima's 12.5th and 95th percentiles, 44 and 368 ms; the median, 123 ms)
    assert not _unfair(ConnectionSpread(200, 368_000, 123_000, 2.0, 2, 0, 44_000, 2))


def test_the_report_says_where_it_shows_each_detectors_evidence():
    """A detector is registered once (diagnose.DETECTORS): its module says where the report shows
    its evidence (SHOWN_IN), and the report's why section reads it from there."""
    from arena.report.data import why_section
    from arena.results.why.diagnose import DETECTORS, shown_in
    from arena.results.why.finding import Evidence, Finding, Why

    assert len({d.KEY for d in DETECTORS}) == len(DETECTORS) and all(d.SHOWN_IN for d in DETECTORS)
    for d in DETECTORS:
        found = Finding(d.KEY, d.NAME, "puma[rack]", "default", "c=4", (Evidence("x", 1.0, "ms"),), 1.0, 2.0, None,
                        "likely", "ref", "fix")
        (table,) = why_section(Why((found,), ())).tables
        assert table.rows[0][-1] == shown_in(d.KEY) == d.SHOWN_IN

