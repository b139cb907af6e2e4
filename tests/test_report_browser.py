"""The report in a real browser: Debian's Chromium, headless, driven by Playwright (no browser
download: Playwright launches /usr/bin/chromium). The page must load offline with no console
error, every chart must have drawn its data points, and a screenshot is kept in
target/test-artifacts/report.png (and report-charts.png, the charts part) to look at."""

from pathlib import Path

import pytest

from arena.app.storage import results
from tests.conftest import CHROMIUM, report_store, require_browser
from arena.app.report import build_report
from arena.report.html import render
from arena.results.store import Store

FIX = Path(__file__).parent / "fixtures" / "report"
ARTIFACTS = Path(__file__).resolve().parents[1] / "target" / "test-artifacts"

# Data points a chart has drawn: markers and bars (plotly's .point), heatmap cells (drawn as an image)
COUNT_POINTS = """() => Array.from(document.querySelectorAll('.chart')).map(el => ({
    id: el.id,
    expected: Number(el.dataset.points),
    drawn: el.querySelectorAll('.point').length + el.querySelectorAll('.hm image').length,
}))"""


def _open(report: Path, shots: dict[str, str], evaluate: str = COUNT_POINTS):
    """Load the report offline in Chromium; return what went wrong (console errors, page errors,
    fetches), the ``evaluate`` result, and take a screenshot per ``shots`` (file -> the element to
    scroll to, "" for the whole page)."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
            page = context.new_page()
            problems: list[str] = []
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("request", lambda r: problems.append(f"fetched {r.url}") if not r.url.startswith(("file:", "data:")) else None)
            page.goto(report.as_uri(), wait_until="load")
            page.wait_for_function("document.querySelectorAll('.chart .main-svg').length > 0")
            found = page.evaluate(evaluate)
            for file, where in shots.items():
                if where:
                    page.locator(where).scroll_into_view_if_needed()
                page.screenshot(path=str(ARTIFACTS / file), full_page=not where)
        finally:
            browser.close()
    return problems, found


ANSWER = """() => ({
    counts: (""" + COUNT_POINTS + """)(),
    headline: document.querySelector('#answer .headline').textContent,
    rows: Array.from(document.querySelectorAll('#answer table tbody tr')).map(
        tr => Array.from(tr.querySelectorAll('td')).map(td => td.textContent)),
    latency: document.querySelector('#chart-latency-default .updatemenu-header-group text').textContent,
})"""


@pytest.mark.integration
def test_the_report_renders_in_chromium(tmp_path):
    require_browser()
    with Store(report_store()) as s:
        res = results(s, "tiny-grid")
    built = build_report(res)
    made = built.charts
    report = tmp_path / "report.html"
    report.write_text(render(built))
    problems, found = _open(report, {"report.png": "", "report-charts.png": "#throughput"}, ANSWER)
    counts = found["counts"]

    assert problems == []
    # the answer as a reader sees it: the sentence, then the best and the group tied with it
    from arena.results.answer import answer

    a = answer(res.cells, "default")
    assert found["headline"].startswith(f"most throughput at any latency (no p99 target): {a.best.cell.label} at ")
    assert [(r[0], r[1]) for r in found["rows"][: 1 + len(a.tied)]] == (
        [("best", a.best.cell.label)] + [("tied", v.cell.label) for v in a.tied])
    assert found["latency"] == "p99"  # the percentiles chart opens on the tail
    assert len(counts) == len(made)
    for c in counts:
        assert c["expected"] > 0 and c["drawn"] > 0, c
    assert (ARTIFACTS / "report.png").stat().st_size > 50_000


PUBLISHED = """() => {
    const h = document.getElementById('published');
    const section = h && h.closest('section');
    return section && {
        title: h.textContent,
        charts: Array.from(section.querySelectorAll('.chart')).map(el => ({
            id: el.id, expected: Number(el.dataset.points), drawn: el.querySelectorAll('.point').length})),
        cells: Array.from(section.querySelectorAll('td')).map(td => td.textContent),
    };
}"""


@pytest.mark.integration
def test_a_reproduced_study_shows_published_vs_here_in_chromium(tmp_path):
    """The report of a study's experiment (a recorded run of fake-work.toml, rochkind-heroku) has
    the "Published vs here" section: its charts drawn, its table with the published figures and
    the verdicts."""
    require_browser()
    from tests.test_reproduce import _copy

    with Store(_copy(tmp_path)) as s:
        built = build_report(results(s, "fake-work"))
    report = tmp_path / "report.html"
    report.write_text(render(built))
    problems, section = _open(report, {"report-published.png": "#published"}, PUBLISHED)

    assert problems == []
    assert section is not None and section["title"] == "Published vs here"
    assert len(section["charts"]) == 5  # one chart per published figure: req/s, mean, p50, p90, p99
    for c in section["charts"]:
        assert c["expected"] > 0 and c["drawn"] > 0, c
    cells = section["cells"]
    assert "Unicorn 4x1 fake_work_50_250 c=10" in cells and "28.6" in cells  # Puma 4x16's published req/s
    assert any(c == "agrees" or c.startswith("differs: ") for c in cells)


FILTERED = """() => {
    const table = document.querySelector('table.comparison');
    const box = table.previousElementSibling;
    const all = table.querySelectorAll('tbody tr').length;
    box.value = '#12';
    box.dispatchEvent(new Event('input'));
    const shown = Array.from(table.querySelectorAll('tbody tr')).filter(tr => !tr.hidden);
    return {counts: (""" + COUNT_POINTS + """)(), all: all, box: box.tagName,
            shown: shown.map(tr => tr.querySelector('td').textContent)};
}"""


@pytest.mark.integration
def test_a_report_of_500_configurations_renders_scrolls_and_filters(tmp_path):
    """A grid of 500 configurations (the fixture grown: tests/stores.py): a page under 5 MB whose
    charts draw the best and whose tables list every cell, filtered by what is typed."""
    require_browser()
    from tests.stores import grow

    grow(tmp_path / "big.db", 1000, 500)
    with Store(tmp_path / "big.db", readonly=True) as s:
        res = results(s, "tiny-grid")
    built = build_report(res, top=4)  # the simulator's cost aside, as the default's twelve
    report = tmp_path / "big.html"
    report.write_text(render(built))
    assert report.stat().st_size < 5_000_000
    problems, found = _open(report, {"report-500.png": "table.comparison"}, FILTERED)

    assert problems == []
    assert found["counts"] and all(c["expected"] > 0 and c["drawn"] > 0 for c in found["counts"])
    assert found["box"] == "INPUT" and found["all"] == len(res.cells) == 1000
    # copy 12 of each of the 8 fixture configurations, at its 2 levels
    assert len(found["shown"]) == 16 and all(label.endswith("#12") for label in found["shown"])
