"""The report from a fixed store (tests/fixtures/report/store.db: real runs of a 2 x 2 grid of two
servers, recorded by tests/fixtures/report/make-store): its structure, its figures against the
store, escaping, the ranking's limits and the exports. Not pixels: the browser test looks at those."""

import base64
import csv
import gzip
import io
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from arena import stats
from tests.conftest import report_store
from arena.app.storage import results
from arena.app.report import build_report
from arena.cli import main
from arena.report import charts
from arena.report.export import chart_csv, draw, export
from arena.report.html import figure, plotly_js, render
from arena.results.aggregate import aggregate, decomposition
from arena.results.answer import Goal, answer, standings
from arena.results.store import Store

FIX = Path(__file__).parent / "fixtures" / "report"
NAME = "tiny-grid"
EVIL = '<script>alert(1)</script>'


@pytest.fixture(scope="module")
def stored():
    with Store(report_store()) as s:
        return s.definition(NAME), s.runs(NAME)


@pytest.fixture(scope="module")
def report():
    with Store(report_store()) as s:
        return build_report(results(s, NAME))


@pytest.fixture(scope="module")
def page(report):
    return render(report), report.charts


def figures(html_text: str) -> dict:
    m = re.search(r'<script type="application/json" id="arena-figures">(.*?)</script>', html_text, re.S)
    return json.loads(m.group(1))


def test_the_fixture_is_what_the_tests_assume(stored):
    _, runs = stored
    assert len(runs) == 32 and {r.server for r in runs} == {"puma", "gunicorn-gthread"}
    assert {(r.processes, r.threads) for r in runs} == {(1, 1), (1, 4), (2, 1), (2, 4)}


def test_one_self_contained_file_with_every_section(page):
    text, made = page
    assert "<script src" not in text and "<link" not in text  # nothing fetched: no CDN, no stylesheet
    page_only = re.sub(r"<script>.*?</script>", "", text, flags=re.S)  # the inlined plotly.js names its site
    assert not re.search(r"""(src|href)=["']https?://""", page_only)
    assert "Plotly.newPlot" in text  # plotly.js itself is inside, gzipped in base64, and unpacks whole
    packed = re.search(r'<script type="application/octet-stream" id="arena-plotly"[^>]*>([^<]+)</script>', text)
    assert gzip.decompress(base64.b64decode(packed.group(1))).decode() == plotly_js()
    for section in ("answer", "ranking", "table", "throughput", "latency", "heatmap", "decomposition", "balance", "memory",
                    "errors", "time-series", "model", "environment"):
        assert f'id="{section}"' in text, section
    figs = figures(text)
    assert set(figs) == {c.id for c in made}
    for c in made:  # a div per figure, and every figure has data points
        assert f'id="chart-{c.id}"' in text
        assert c.points() > 0, c.id
    kinds = {c.id.split("-")[0] for c in made}
    assert kinds >= {"throughput", "latency", "spectrum", "heatmap", "decomposition", "balance", "memory", "time"}
    # the fixture's runs had no errors: no chart of zeros, a sentence instead
    assert "errors" not in kinds and "No errors: every request of every run was answered" in text
    # processes x threads heatmaps: throughput, p99 and memory for each of the two servers
    assert sum(c.kind == "heatmap" for c in made) == 6


def test_user_strings_are_escaped(page):
    text, _ = page
    assert EVIL not in text and "<script>alert('description')" not in text
    # in HTML text: entities; in the figures' JSON: no '<' at all; in plotly labels: entities too
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<script>alert(" not in text
    blob = re.search(r'id="arena-figures">(.*?)</script>', text, re.S).group(1)
    assert "<" not in blob and ">" not in blob
    names = [t["name"] for f in figures(text).values() for t in f["data"] if "name" in t]
    assert any("&lt;b&gt;" in n for n in names) and not any("<" in n for n in names)


def test_the_model_section_gives_its_error(page):
    text, made = page
    assert any(c.section == "model" for c in made)
    m = re.search(r"Mean absolute percentage error of throughput: ([0-9.]+)%", text)
    assert m and float(m.group(1)) < 100
    assert "<h3>Calibration (lowest-load runs)</h3>" in text


def test_the_report_opens_with_the_answer(report, stored):
    _, runs = stored
    cells = aggregate(runs)
    best = standings(cells)[0]
    first = report.answer[0]
    assert first.startswith(f"most throughput at any latency (no p99 target): {best.label} at {best.level_label}: "
                            f"{best.throughput.median:.1f} req/s")
    assert any(line.startswith(f"What binds {best.label}: ") for line in report.answer)
    # no latency target: the Pareto front is given, and each other configuration is compared with the best
    assert any(line.startswith("No latency target given") for line in report.answer)
    # the table: the best, the group tied with it (each with its ratio to the best), each server's best
    (opening,) = report.opening
    rows = {(r[0], r[1]): r for r in opening.table.rows}
    a = answer(cells, "default")
    assert rows[("best", best.label)][6] == "-"
    for v in a.tied:
        assert rows[("tied", v.cell.label)][6:] == [str(v.throughput.ratio), v.throughput.verdict]
    servers = {p.cell.server for p in a.per_server}
    listed = {r[1] for r in opening.table.rows}
    assert servers == {"puma", "gunicorn-gthread"} and all(p.cell.label in listed for p in a.per_server)
    # two repetitions: the interval beside the median is the repetitions' range, and says so
    assert "range " in first and any("range of the repetitions" in line for line in report.answer)
    invalid = sum(not r.valid for r in runs)
    left = next(line for line in report.answer if line.startswith(("Left out", "No run was left out")))
    assert (str(invalid) in left) if invalid else left.startswith("No run was left out")


def test_throughput_chart_is_the_median_and_its_interval_of_the_valid_runs(stored, page):
    _, runs = stored
    _, made = page
    chart = next(c for c in made if c.id == "throughput-default")
    label = "gunicorn-gthread[wsgi] p=2 t=4"
    s = next(s for s in chart.series if s.name == label)
    tp = [r.throughput for r in runs if r.label == label and r.level == 4 and r.valid]
    assert s.x == [1, 4]
    assert s.y[1] == pytest.approx(stats.median(tp))
    if len(tp) > 1:  # two repetitions: the band is their range (too few for a 95% interval of the median)
        assert (s.lo[1], s.hi[1]) == pytest.approx((min(tp), max(tp)))
    rows = list(csv.DictReader(io.StringIO(chart_csv(chart))))
    row = next(r for r in rows if r["series"] == label and float(r["concurrency (closed model)"]) == 4)
    assert float(row["requests/s"]) == pytest.approx(stats.median(tp))


def test_ranking_respects_the_goal(stored):
    _, runs = stored
    cells = aggregate(runs)
    a = answer(cells, "default")
    assert {p.cell.server for p in a.per_server} == {"puma", "gunicorn-gthread"}
    overall = standings(cells)
    assert [c.throughput.median for c in overall] == sorted((c.throughput.median for c in overall), reverse=True)
    best = overall[0]
    tight = best.p99_us.median / 1000 * 0.999  # the best one no longer fits
    limited = standings(cells, Goal(p99_ms=tight))
    assert all(c.p99_us.median / 1000 <= tight for c in limited) and best not in limited
    assert standings(cells, Goal(memory_mib=1)) == []


def test_the_comparison_interval_is_of_the_median(stored, tmp_path, capsys):
    """With 2 repetitions the table shows their range, marked as a range (arena show and the report)."""
    _, runs = stored
    from arena.report.data import comparison_table

    cells = aggregate(runs)
    table = comparison_table(cells)
    col = table.head.index("req/s interval")
    for c, row in zip(cells, table.rows):
        tp = [r.throughput for r in c.valid_runs]
        if len(tp) == 2:
            assert row[col] == f"range {min(tp):.4g} .. {max(tp):.4g}"
        assert row[table.head.index("req/s")].startswith(f"{c.throughput.median:.4g}"[:3])
    assert main(["show", NAME, "--store", report_store()]) == 0
    out = capsys.readouterr().out
    lead = "most throughput at any latency"
    assert lead in out and "range " in out and out.index(lead) < out.index("req/s interval")


def test_html_and_exports_draw_each_series_in_the_same_colour(page, tmp_path):
    """The HTML's plotly traces and the matplotlib pictures of the same charts: one colour per series."""
    _, made = page
    compared = 0
    for chart in (c for c in made if c.kind != "heatmap"):
        # plotly gets one drawn trace per series, in order (a band adds two traces without a legend)
        traces = [t for t in figure(chart)["data"] if t.get("showlegend") is not False]
        assert len(traces) == len(chart.series), chart.id
        for group in (chart.groups or [""])[:3]:
            drawn = draw(chart, group, tmp_path / "x.svg")  # what matplotlib holds, read back
            for series, trace in zip(chart.series, traces):
                if series.group == group and series.name in drawn:
                    assert drawn[series.name] == (trace.get("line") or trace.get("marker"))["color"], (chart.id, series.name)
                    compared += 1
    assert compared > 30
    # a model line keeps its configuration's colour: measured and predicted series share it
    model = next(c for c in made if c.section == "model")
    for s in model.series:
        if s.name.endswith(" (model)"):
            assert s.color == next(m.color for m in model.series if m.name == s.name.removesuffix(" (model)"))
    # and a configuration has one colour across charts
    tp = next(c for c in made if c.id == "throughput-default")
    lat = next(c for c in made if c.id == "latency-default")
    assert {s.name: s.color for s in tp.series} == {s.name: s.color for s in lat.series if s.group == "p50"}


def test_heatmap_colours_do_not_split_noise():
    # medians 100 and 103 whose intervals are 20 wide: one colour range spanning the noise, not 100..103
    lo, hi = charts.heatmap_range([[100.0, 103.0]], [20.0, 18.0])
    assert hi - lo == pytest.approx(20.0) and lo <= 100 and hi >= 103
    # real differences keep the full range
    assert charts.heatmap_range([[100.0, 300.0]], [20.0]) == (100.0, 300.0)
    # 189 vs 191 req/s with two repetitions' narrow ranges (a report of this machine): the 5% floor
    lo, hi = charts.heatmap_range([[189.0], [191.0]], [1.0, 0.8])
    assert hi - lo == pytest.approx(0.05 * 191) and lo < 189 and hi > 191
    # no repetitions: the same floor
    lo, hi = charts.heatmap_range([[100.0, 101.0]], [])
    assert hi - lo == pytest.approx(5.05)
    assert charts.heatmap_range([[None]], []) is None


def test_decomposition_adds_up():
    parts = decomposition({"app": 30.0, "cpu": 8.0, "cpuwall": 10.0, "io": 15.0, "queue": 4.0}, 40.0)
    assert parts == {"queue": 4.0, "GIL/CPU wait": 2.0, "CPU": 8.0, "I/O": 15.0, "other in app": 5.0,
                     "outside the app": 6.0, "pool wait": None, "database": None, "downstream API": None,
                     "CPU outside the request thread": None, "CPU quota wait": None}
    assert sum(v for v in parts.values() if v) == 40.0
    # under a CPU quota: the throttled time per request comes out of the GIL/CPU wait, at most all of it
    held = decomposition({"app": 30.0, "cpu": 8.0, "cpuwall": 10.0, "io": 15.0, "queue": 4.0}, 40.0, quota_ms=1.5)
    assert (held["CPU quota wait"], held["GIL/CPU wait"]) == (1.5, 0.5) and sum(v for v in held.values() if v) == 40.0
    most = decomposition({"app": 30.0, "cpu": 8.0, "cpuwall": 10.0, "io": 15.0, "queue": 4.0}, 40.0, quota_ms=9.0)
    assert (most["CPU quota wait"], most["GIL/CPU wait"]) == (2.0, 0.0)
    # a /db request: its I/O phase split into the pool wait and the query, the parts still add up
    db = decomposition({"app": 12.0, "cpu": 0.0, "cpuwall": 0.0, "io": 11.5, "pool": 3.0, "db": 8.0}, 14.0)
    assert (db["pool wait"], db["database"], db["I/O"], db["downstream API"]) == (3.0, 8.0, 0.5, None)
    assert sum(v for v in db.values() if v) == pytest.approx(14.0)
    # without a request-start stamp there is no queue figure, and the rest is outside the app
    assert decomposition({"app": 30.0, "cpu": 8.0, "cpuwall": 10.0, "io": 15.0}, 40.0)["outside the app"] == 10.0


def test_cpu_the_request_thread_does_not_see_is_taken_out_of_other_in_app():
    # an async app whose SQL runs in a thread pool: 2.85 ms of CPU on the request's coroutine, 5.4 ms
    # per request in the server's cgroup; the coroutine waited 3 ms for the pool
    timing = {"app": 6.0, "cpu": 2.85, "cpuwall": 3.0}
    parts = decomposition(timing, 6.5, cgroup_cpu_ms=5.4)
    assert parts["CPU outside the request thread"] == pytest.approx(2.55)
    assert parts["other in app"] == pytest.approx(0.45) and parts["CPU"] == 2.85
    assert sum(v for v in parts.values() if v) == pytest.approx(6.5)
    # within 20% of each other: the request thread's CPU is the whole story
    assert decomposition(timing, 6.5, cgroup_cpu_ms=3.4)["CPU outside the request thread"] is None
    # the difference is at most what the app waited for beyond its own work; the rest was the server's
    # own (outside the app)
    capped = decomposition(timing, 6.5, cgroup_cpu_ms=9.0)
    assert capped["CPU outside the request thread"] == pytest.approx(3.0) and capped["other in app"] == 0.0


def test_percentile_spectrum_axis():
    assert charts.spectrum_x(0.9) == pytest.approx(10) and charts.spectrum_x(0.999) == pytest.approx(1000)


def test_exports_write_csv_and_svg(page, tmp_path):
    _, made = page
    small = [c for c in made if c.id in ("throughput-default", "heatmap-puma-throughput-default", "memory")]
    files = export(small, tmp_path, "svg")
    assert {f.name for f in files} == {"throughput-default.csv", "throughput-default.svg", "memory.csv", "memory.svg",
                                       "heatmap-puma-throughput-default.csv", "heatmap-puma-throughput-default.svg"}
    for f in files:
        assert f.stat().st_size > (2000 if f.suffix == ".svg" else 40)
        if f.suffix == ".svg":
            assert ET.parse(f).getroot().tag.endswith("svg")
    heat = list(csv.reader(io.StringIO((tmp_path / "heatmap-puma-throughput-default.csv").read_text())))
    assert heat[0] == ["processes", "threads per process", "requests/s"] and len(heat) == 5  # 2 x 2 cells


def test_arena_report_command(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", NAME, "--store", report_store(), "-o", str(out), "--p99-max", "50"]) == 0
    assert 2_000_000 < out.stat().st_size < 3_000_000  # plotly.js packed inside (2.0 MB), the rest bounded
    assert "p99 &lt;= 50 ms" in out.read_text()
    assert str(out) in capsys.readouterr().out
    # the store's most recent experiment when none is named
    copy = tmp_path / "s.db"
    shutil.copy(report_store(), copy)
    assert main(["report", "--store", str(copy), "-o", str(tmp_path / "d.html")]) == 0


def test_report_errors_are_one_line(tmp_path, capsys):
    assert main(["report", "nope", "--store", report_store(), "-o", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("arena: error: experiment: no experiment named 'nope'") and err.count("\n") == 1
    assert main(["report", NAME, "--store", report_store(), "-o", "/nonexistent/dir/r.html"]) == 2
    assert "--output /nonexistent/dir/r.html: its directory /nonexistent/dir does not exist" in capsys.readouterr().err
    assert main(["report", "--store", str(tmp_path / "missing.db")]) == 2
    assert "no such store" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", "--p99-max", "-3"])
    assert "--p99-max" in capsys.readouterr().err


def test_the_charts_draw_the_best_configurations_and_the_tables_every_one():
    """With more configurations than it charts, a report draws the best in the answer's standing and
    each server's best, simulates only those, and still tables every one."""
    from arena.app.analysis import analyse
    from arena.report.data import charted

    with Store(report_store(), readonly=True) as s:
        res = results(s, NAME)
    a = analyse(res).answers[0]
    shown = charted([a], res.cells, 4)
    standing = list(dict.fromkeys(c.config for c in a.placed))
    assert set(standing[:4]) <= shown and {p.cell.config for p in a.per_server} <= shown
    assert 4 <= len(shown) < len({c.config for c in res.cells}) == 8
    built = build_report(res, top=4)
    drawn = {sr.name for sr in next(c for c in built.charts if c.id.startswith("throughput")).series}
    assert drawn == {c.label for c in res.cells if c.config in shown}
    table = next(t for sec in built.sections for t in sec.tables if t.cls == "comparison")
    assert len(table.rows) == len(res.cells)
    points = next(t for sec in built.sections for t in sec.tables if t.cls == "model").rows
    simulated = {row[0] for row in points if row[8] != "-"}
    assert simulated and simulated <= drawn
    assert any("charts draw" in p for p in built.sections[0].paragraphs)


def test_the_terminal_table_fits_its_width_and_keeps_every_cell():
    from arena.report.data import Table
    from arena.report.text_table import text_table

    t = Table(["configuration", "level", "req/s"], [["puma <b>x</b> p=2 t=4 and a long label", "c=1", "133"],
                                                    ["gunicorn", "c=4", "451"]])
    wide = text_table(t, "title", 80).splitlines()
    assert wide[0].strip() == "title" and wide[1].startswith("┏") and wide[-1].startswith("└")
    assert "│ puma <b>x</b> p=2 t=4 and a long label │ c=1   │ 133   │" in wide  # a row a line where it fits
    narrow = text_table(t, "title", 34).splitlines()
    assert max(map(len, narrow)) <= 34 and len(narrow) > len(wide)
    cells = " ".join(line.split("│")[1].strip() for line in narrow if line.startswith("│"))
    assert cells.split() == "puma <b>x</b> p=2 t=4 and a long label gunicorn".split()  # folded at spaces
    # a cell that fits is printed as it stands; one with a tab, a newline or spaces around is folded
    # as textwrap folds it, even where it would fit
    odd = text_table(Table(["a", "b", "c"], [["x\ty", " z ", "p\nq"]]), "t", 80).splitlines()
    assert odd[-3:-1] == ["│ x   │  z  │ p q │", "│ y   │     │     │"]  # the tab as 8 spaces, a leading one kept


def test_the_terminal_tables_folds_are_textwraps():
    """text_table folds plain cells (words one space apart) itself, a word at a time: the lines
    textwrap gives, on random cells of words, long words, runs of spaces and widths."""
    import random
    import textwrap

    from arena.report.data import Table
    from arena.report.text_table import text_table

    rnd = random.Random(7)
    for _ in range(300):
        words = ["".join(rnd.choice("abc=<>.-") for _ in range(rnd.randint(1, 12))) for _ in range(rnd.randint(1, 8))]
        cell = rnd.choice([" ", " ", " ", "  "]).join(words)
        width = rnd.randint(8, 40)
        table = text_table(Table(["x"], [[cell]]), "t", width).splitlines()
        inner = len(table[1]) - 4  # the column's width, between its bars and their spaces
        folded = [line[2:-2].rstrip() for line in table if line.startswith("│")]
        want = textwrap.wrap(cell, inner, break_long_words=True, break_on_hyphens=False)
        assert folded == [line.rstrip() for line in want], (cell, width)


def test_report_top_sets_how_many_configurations_the_charts_draw(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", NAME, "--store", report_store(), "-o", str(out), "--top", "2"]) == 0
    throughput = figures(out.read_text())["throughput-default"]
    drawn = {trace["name"] for trace in throughput["data"] if trace.get("showlegend", True) and trace.get("name")}
    assert 2 <= len(drawn) <= 4 < 8  # the best two, and each of the 2 servers' best, of the 8 configurations
    assert "The charts draw" in out.read_text()
    with pytest.raises(SystemExit) as exited:
        main(["report", NAME, "--store", report_store(), "--top", "0"])
    assert exited.value.code == 2
    assert "--top: must be a whole number from 1 to 1000, got '0'" in capsys.readouterr().err


def test_the_method_states_the_validity_rules_with_the_experiments_thresholds(report, stored):
    """The method section's rules are the code's (results/validity.py RULES), with the stored
    experiment's thresholds where it set them and the defaults elsewhere."""
    from arena.plan.parse import VALIDITY_DEFAULTS
    from arena.results.validity import method

    definition, _ = stored
    rules = [p for p in report.method if p.startswith("A run is invalid when")]
    assert all(k not in definition for k in VALIDITY_DEFAULTS)  # the fixture sets none: the defaults stand
    assert rules == [method(VALIDITY_DEFAULTS)]
    assert "error_threshold (1%)" in rules[0] and "speed_threshold (100%)" in rules[0]
