"""JUnit XML for CI dashboards (Jenkins, GitLab, GitHub's test reporters): ``arena show`` and
``arena compare`` as one test case per check, a ``<failure>`` where a check failed, ``<skipped>``
where it could not be judged. Formats only.

The layout is the common JUnit one (Ant's): ``<testsuites>`` of ``<testsuite name tests failures
skipped>`` of ``<testcase classname name>`` with an optional ``<failure message>`` or ``<skipped
message>`` and ``<system-out>``; every reader of JUnit reports takes it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Sequence

from arena.report.answer_view import answer_lines
from arena.report.comparison_view import more, rows
from arena.report.formats.registry import CompareView, Format, ShowView, register
from arena.report.tune_view import capacity_text
from arena.results.aggregate import FIGURES


@dataclass(frozen=True)
class Case:
    classname: str
    name: str
    failure: str | None = None  # why it failed
    skipped: str | None = None  # why it was not judged
    out: str = ""  # what was measured


def document(suite: str, cases: Sequence[Case]) -> str:
    """One suite of ``cases`` as a JUnit XML document."""
    root = ET.Element("testsuites")
    s = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)),
                      failures=str(sum(c.failure is not None for c in cases)),
                      skipped=str(sum(c.skipped is not None and c.failure is None for c in cases)))
    for c in cases:
        case = ET.SubElement(s, "testcase", classname=c.classname, name=c.name)
        if c.failure is not None:
            ET.SubElement(case, "failure", message=c.failure).text = c.failure
        elif c.skipped is not None:
            ET.SubElement(case, "skipped", message=c.skipped)
        if c.out:
            ET.SubElement(case, "system-out").text = c.out
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def show(v: ShowView) -> str:
    """Each threshold on each cell (failed where it does not hold, skipped where the cell has no such
    figure), each capacity searched (failed where none was found), and, per workload, whether any
    configuration keeps within the goal."""
    cases = []
    for o in v.thresholds:
        unit = FIGURES[o.threshold.figure][0]
        value = "-" if o.value is None else f"{o.value:.4g} {unit}"
        cases.append(Case(f"{o.cell.label} at {o.cell.level_label}", f"threshold {o.threshold.text}",
                          failure=None if o.passed is not False else f"{o.threshold.figure} {value}: {o.threshold.text} "
                                                                      "does not hold",
                          skipped="no such figure (no valid run)" if o.passed is None else None, out=value))
    for label, workload, cap in v.capacities:
        cases.append(Case(label, f"capacity ({workload})", failure=None if cap.lo is not None else
                          "no rate kept within the goal", out=capacity_text(cap)))
    for a in v.answers:
        best = a.best
        cases.append(Case(f"{v.name} {a.workload}", f"a configuration within the goal ({a.goal})",
                          failure=None if best is not None else f"none keeps within the goal ({a.goal})",
                          out=answer_lines(a, False)[0]))
    return document(f"arena show {v.name}", cases)


def compare(v: CompareView) -> str:
    """A test case per cell and figure: failed where it breaks a --fail-on rule, skipped where the
    comparison is undecided or cannot be made, passed otherwise."""
    failed = {(ch.cell, ch.figure): r.text for r, ch in v.broken}
    cases = []
    for ch, row in zip(v.changes, rows(list(v.changes))):
        c = ch.comparison
        why = failed.get((ch.cell, ch.figure))
        cases.append(Case(ch.cell, ch.figure,
                          failure=None if why is None else f"{why}: {ch.figure} {c.ratio} ({c.verdict})",
                          skipped=None if c is not None and c.verdict != "undecided" else
                          ("no comparison (a side has no valid run)" if c is None else f"undecided{more(c)}"),
                          out=f"base {row[2]}, new {row[3]}, new / base {row[4]}, {row[5]}"))
    return document(f"arena compare {v.new} against {v.base}", cases)


register(Format("junit", "JUnit XML for a CI's test report", {"show": show, "compare": compare}))
