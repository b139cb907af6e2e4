"""JUnit XML for CI dashboards (Jenkins, GitLab, GitHub's test reporters): one test case per check,
a ``<failure>`` where a check failed, ``<skipped>`` where it could not be judged. Formats only.

The layout is the common JUnit one (Ant's): ``<testsuites>`` of ``<testsuite name tests failures
skipped>`` of ``<testcase classname name>`` with an optional ``<failure message>`` or ``<skipped
message>`` and ``<system-out>``; every reader of JUnit reports takes it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Sequence


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
