"""The report in a real browser: Debian's Chromium, headless, driven by Playwright (no browser
download: Playwright launches /usr/bin/chromium). The page must load offline with no console
error, every chart must have drawn its data points, and a screenshot is kept in
target/test-artifacts/report.png (and report-charts.png, the charts part) to look at."""

import os
import shutil
from pathlib import Path

import pytest

from arena.app.experiments import results
from tests.conftest import report_store
from arena.app.report import build_report
from arena.report.html import render
from arena.results.store import Store

FIX = Path(__file__).parent / "fixtures" / "report"
ARTIFACTS = Path(__file__).resolve().parents[1] / "target" / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# Data points a chart has drawn: markers and bars (plotly's .point), heatmap cells (drawn as an image)
COUNT_POINTS = """() => Array.from(document.querySelectorAll('.chart')).map(el => ({
    id: el.id,
    expected: Number(el.dataset.points),
    drawn: el.querySelectorAll('.point').length + el.querySelectorAll('.hm image').length,
}))"""


def _require_browser():
    missing = []
    if not os.access(CHROMIUM, os.X_OK):
        missing.append("chromium (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (uv sync)")
    if missing:
        if os.environ.get("ARENA_REQUIRE_ALL") == "1":
            pytest.fail("browser test needs: " + ", ".join(missing))
        pytest.skip("browser test needs: " + ", ".join(missing))


def test_the_report_renders_in_chromium(tmp_path):
    _require_browser()
    from playwright.sync_api import sync_playwright

    with Store(report_store()) as s:
        built = build_report(results(s, "tiny-grid"))
    text, made = render(built), built.charts
    report = tmp_path / "report.html"
    report.write_text(text)
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
            counts = page.evaluate(COUNT_POINTS)
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
            page.locator("#throughput").scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "report-charts.png"))
        finally:
            browser.close()

    assert problems == []
    assert len(counts) == len(made)
    for c in counts:
        assert c["expected"] > 0 and c["drawn"] > 0, c
    assert (ARTIFACTS / "report.png").stat().st_size > 50_000
