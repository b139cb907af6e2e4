"""arena compare on the recorded fixture store: an experiment against itself is the same (or
undecided), a slower copy is caught as worse and fails --fail-on, and the outputs (Markdown, JSON
against its schema) say so."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from arena.cli import main
from arena.results.comparison import Rule, rules
from tests.conftest import report_store

ROOT = Path(__file__).resolve().parents[1]
NAME = "tiny-grid"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The fixture experiment exported as JSON, and a copy whose every p99 is 40% higher."""
    where = tmp_path_factory.mktemp("compare")
    from arena.app.storage import export

    doc = json.loads(export(report_store(), NAME, "json"))
    same, slower = where / "base.json", where / "slower.json"
    same.write_text(json.dumps(doc))
    for r in doc:
        if r.get("p99_us"):
            r["p99_us"] = int(r["p99_us"] * 1.4)
    slower.write_text(json.dumps(doc))
    return str(same), str(slower)


def test_an_experiment_against_itself_is_never_better_or_worse(exported, capsys):
    same, _ = exported
    assert main(["compare", same, NAME, "--store", report_store(), "--format", "json",
                 "--fail-on", "p99>+10%,throughput<-5%"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(json.loads((ROOT / "schemas" / "compare.schema.json").read_text())).validate(doc)
    assert doc["changes"] and {c["verdict"] for c in doc["changes"]} <= {"same", "undecided"}
    assert all(c["ratio"] == pytest.approx(1.0) for c in doc["changes"]) and doc["broken"] == []


def test_a_regression_beyond_a_rule_exits_1_and_says_where(exported, capsys):
    same, slower = exported
    assert main(["compare", same, slower, "--fail-on", "p99>+10%", "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("### Arena: ") and "FAILED: p99>+10% by " in out and "| p99 |" in out
    assert "1.400x" in out and "worse" in out
    # a limit the change stays within passes; an undecided change breaks nothing
    assert main(["compare", same, slower, "--fail-on", "p99>+50%"]) == 0
    assert "passed: p99>+50%" in capsys.readouterr().out


def test_junit_has_a_case_per_cell_and_figure_failed_where_a_rule_broke(exported, capsys):
    """CI dashboards read JUnit XML: the same comparison, each cell and figure a test case."""
    same, slower = exported
    assert main(["compare", same, slower, "--fail-on", "p99>+10%", "--format", "junit"]) == 1
    suite = ET.fromstring(capsys.readouterr().out).find("testsuite")
    cases = suite.findall("testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("tests")) == len(cases) > 0 and int(suite.get("failures")) == len(failed) > 0
    assert {c.get("name") for c in failed} == {"p99"} and all("p99>+10%" in c.find("failure").get("message")
                                                               for c in failed)
    assert main(["compare", same, same, "--fail-on", "p99>+10%", "--format", "junit"]) == 0
    assert ET.fromstring(capsys.readouterr().out).find("testsuite").get("failures") == "0"


def test_show_writes_markdown_and_junit_for_ci(capsys):
    assert main(["show", NAME, "--store", report_store(), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith(f"### Arena: `{NAME}`") and "| configuration |" in md
    assert main(["show", NAME, "--store", report_store(), "--format", "junit", "--p99-max", "0.001"]) == 0
    suite = ET.fromstring(capsys.readouterr().out).find("testsuite")
    (goal,) = [c for c in suite.findall("testcase") if c.get("name").startswith("a configuration within the goal")]
    assert "none keeps within the goal" in goal.find("failure").get("message")


def test_markdown_shows_a_hostile_label_as_text_never_as_markup(exported, capsys):
    """The fixture's label is ``puma <b>"fast"</b> & <script>alert(1)</script>``: a pull-request
    comment must show it, not run it (GitHub renders a comment's HTML)."""
    from arena.report.formats.markdown import code, escape

    assert escape('a <script>x</script> & b|c *d* [e](f)') == r"a &lt;script>x&lt;/script> & b\|c \*d\* \[e\](f)"
    assert escape("&amp; &#60; <!-- x --> <?php") == "&amp;amp; &amp;#60; &lt;!-- x --> &lt;?php"
    assert escape("throughput<-20%, a <= b") == "throughput<-20%, a <= b"  # no HTML can start there
    assert escape("> quoted") == r"\> quoted" and escape("p99>+10%") == "p99>+10%"
    assert escape("two\nlines") == "two lines"
    assert code("x`y") == "``x`y``" and code("`x") == "`` `x ``" and code("plain") == "`plain`"
    same, _ = exported
    for argv in (["show", NAME, "--store", report_store()], ["compare", same, NAME, "--store", report_store()]):
        assert main([*argv, "--format", "markdown"]) in (0, 1)
        md = capsys.readouterr().out
        assert "puma &lt;b>\"fast\"&lt;/b> & &lt;script>alert(1)&lt;/script>" in md, argv
        assert "<script>" not in md and "<b>" not in md, argv


def test_rules_are_read_or_refused_in_one_line(capsys):
    assert rules("p99>+10%, throughput<-5%") == [Rule("p99", ">", 0.10, "p99>+10%"), Rule("throughput", "<", -0.05,
                                                                                             "throughput<-5%")]
    assert main(["compare", "a.json", "b.json", "--fail-on", "latency>10%"]) == 2
    err = capsys.readouterr().err
    assert "--fail-on: 'latency>10%' is not a rule" in err and err.count("\n") == 1
    for wrong, said in (("p99<+10%", "'p99<+10%' would fail on p99 getting better: p99 is better lower, so its rule "
                                      "is p99>+N%"),
                        ("throughput>-5%", "its rule is throughput<-N%"), ("p99>-5%", "would fail on p99 getting better"),
                        ("", "'' is not a rule"), ("p99>+10%,", "'' is not a rule")):
        assert main(["compare", "a.json", "b.json", "--fail-on", wrong]) == 2, wrong
        err = capsys.readouterr().err
        assert err.startswith(f"arena: error: --fail-on: ") and said in err and err.count("\n") == 1, err
    assert main(["compare", "nope", NAME, "--store", report_store()]) == 2
    assert "nope: no experiment 'nope'" in capsys.readouterr().err


def test_a_json_file_that_is_not_an_export_is_refused_in_one_line(exported, tmp_path, capsys):
    same, _ = exported
    doc = json.loads(Path(same).read_text())
    doc[1]["throughput"] = "lots"
    cases = {"a string": ("\"x\"", '"x" is not of type \'array\''), "an empty list": ("[]", "[] should be non-empty"),
             "a list of strings": ('["a"]', 'run 1: "a" is not of type \'object\''),
             "an edited run": (json.dumps(doc), f"run 2 ({doc[1]['run_key']}), throughput: \"lots\" is not of type"),
             "not JSON": ("{", "not JSON (")}
    for name, (text, said) in cases.items():
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        assert main(["compare", same, str(bad)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"arena: error: {bad}: ") and said in err and err.count("\n") == 1, (name, err)
        assert "Error" not in err, err


def test_histograms_export_in_hdrhistograms_own_formats(tmp_path, capsys):
    """.hlog: every run's histogram as an interval that HdrHistogram's own reader reads back whole;
    .hgrm: per cell, the valid runs' histograms merged exactly (the total count is their sum)."""
    import re

    from hdrh.log import HistogramLogReader

    from arena.results.aggregate import aggregate
    from arena.results.store import Store

    with Store(report_store()) as s:
        runs = s.runs(NAME)
    log = tmp_path / "x.hlog"
    assert main(["export", NAME, "--store", report_store(), "--format", "hlog", "-o", str(log)]) == 0
    reader = HistogramLogReader(str(log), __import__("hdrh.histogram").histogram.HdrHistogram(1, 60_000_000, 3))
    counts = []
    while (h := reader.get_next_interval_histogram()) is not None:
        counts.append(h.get_total_count())
    assert counts == [r.load.measured.response_time.count for r in runs]
    assert log.read_text().count("#run: ") == len(runs)

    out = tmp_path / "hgrm"
    assert main(["export", NAME, "--store", report_store(), "--format", "hgrm", "-o", str(out)]) == 0
    cells = [c for c in aggregate(runs) if c.valid]
    files = sorted(out.iterdir())
    assert len(files) == len(cells)
    totals = sorted(int(float(re.search(r"TotalCount\s*=\s*([0-9.]+)", f.read_text()).group(1))) for f in files)
    mean, sd = map(float, re.search(r"Mean += +([0-9.]+), StdDeviation += +([0-9.]+)", files[0].read_text()).groups())
    assert sd < 10 * mean  # in the same unit as the mean (hdrh leaves it unscaled; Arena scales it)
    assert totals == sorted(sum(r.load.measured.response_time.count for r in c.valid_runs) for c in cells)
    assert main(["export", NAME, "--store", report_store(), "--format", "hgrm"]) == 2  # needs -o DIR
    assert "give a directory with -o DIR" in capsys.readouterr().err


@pytest.mark.integration
def test_a_real_runs_seconds_export_as_one_interval_each(tmp_path):
    """--per second: each interval of a real run's series is one interval of the log, read back by
    HdrHistogram's own reader with that second's count, at that second's time."""
    import subprocess
    import sys

    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    from arena.results.store import Store
    from tests.conftest import require_server

    require_server("puma")
    exp, db, log = tmp_path / "s.toml", tmp_path / "arena.db", tmp_path / "s.hlog"
    exp.write_text('name = "s"\nrepetitions = 1\nduration = "2500ms"\nwarmup = "300ms"\nothers_threshold = 1\n'
                   'speed_threshold = 10\ndrift_threshold = 10\n[workload]\npath = "/work?cpu_ms=2"\n'
                   '[load]\nconcurrency = [2]\n[[servers]]\nserver = "puma"\nprocesses = 1\nthreads = 2\n')
    run = subprocess.run([sys.executable, "-m", "arena", "run", str(exp), "--store", str(db)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert main(["export", "s", "--store", str(db), "--format", "hlog", "--per", "second", "-o", str(log)]) == 0
    with Store(str(db)) as s:
        (r,) = s.runs("s", "whole")  # each second's histogram is in the whole document, not the summary
    points = [p for p in r.load.series if p.completed]
    assert len(points) >= 3 and all(p.hdr for p in points)
    reader = HistogramLogReader(str(log), HdrHistogram(1, 60_000_000, 3))
    read = []
    while (h := reader.get_next_interval_histogram()) is not None:
        read.append((h.get_start_time_stamp() / 1000, h.get_total_count()))
    assert [n for _, n in read] == [p.completed for p in points]
    begun = r.load.raw["started_at"] + r.load.warmup.duration_s
    assert [t for t, _ in read] == pytest.approx([begun + p.t for p in points], abs=0.002)
    assert sum(n for _, n in read) >= r.load.measured.completed  # the window's answers, and any late ones


def test_a_format_registered_once_is_offered_by_show_and_compare(exported, capsys):
    """report/formats/: a format is a Format registered once; show and compare offer it under
    --format and hand it their views. A throwaway one, registered here and removed after, renders
    what it is given."""
    from arena.report.formats import CompareView, Format, ShowView, formats, register, unregister

    def show(v: ShowView) -> str:
        return f"SHOW {v.name}: {len(v.answers)} answer(s), {len(v.cells)} cells\n"

    def compare(v: CompareView) -> str:
        return f"COMPARE {v.new} against {v.base}: {len(v.changes)} changes\n"

    register(Format("shout", "a test's own", {"show": show, "compare": compare}))
    try:
        assert "shout" in formats("show") and "shout" in formats("compare") and "shout" not in formats("tune")
        with pytest.raises(ValueError, match="registered already"):
            register(Format("shout", "again", {"show": show}))
        assert main(["show", NAME, "--store", report_store(), "--format", "shout"]) == 0
        assert re.fullmatch(rf"SHOW {NAME}: 1 answer\(s\), \d+ cells\n", capsys.readouterr().out)
        same, _ = exported
        assert main(["compare", same, NAME, "--store", report_store(), "--format", "shout"]) == 0
        assert re.fullmatch(rf"COMPARE {NAME} against .*base.json: \d+ changes\n", capsys.readouterr().out)
    finally:
        unregister("shout")
    with pytest.raises(SystemExit):  # gone with it
        main(["show", NAME, "--store", report_store(), "--format", "shout"])


def test_an_export_format_registered_once_is_offered_by_export(capsys):
    """arena export's formats are registered ones too (csv first, the default): a throwaway one is
    offered and handed the runs it reads."""
    from arena.report.formats import Format, formats, register, unregister

    def tsv(v) -> dict[str, str]:
        runs, _ = v.read("none")
        return {f"{v.name}.tsv": "".join(f"{r.config}\t{r.throughput}\n" for r in runs)}

    assert formats("export")[0] == "csv" and {"json", "hlog", "hgrm"} <= set(formats("export"))
    register(Format("tsv", "a test's own", {"export": tsv}))
    try:
        assert main(["export", NAME, "--store", report_store(), "--format", "tsv"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines and all(len(line.split("\t")) == 2 for line in lines)
    finally:
        unregister("tsv")
