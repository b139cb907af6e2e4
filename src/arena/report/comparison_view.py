"""A comparison of two experiments (results/comparison.py) as rows, Markdown for a pull request, JSON
(schemas/compare.schema.json) and JUnit XML for a CI dashboard. Formats only."""

from __future__ import annotations

from typing import Any

from arena.results.aggregate import FIGURES
from arena.report.junit import Case, document
from arena.report.markdown import code, escape as esc
from arena.results.comparison import Change, Rule

HEAD = ("cell", "figure", "base", "new", "new / base", "verdict")


def rows(changes: list[Change]) -> list[list[str]]:
    out = []
    for ch in changes:
        unit = FIGURES[ch.figure][0]
        c = ch.comparison
        out.append([ch.cell, ch.figure, _num(ch.base, unit), _num(ch.new, unit), "-" if c is None else str(c.ratio),
                    "-" if c is None else c.verdict + _more(c)])
    return out


def _more(c) -> str:
    if c.verdict != "undecided":
        return ""
    if c.ratio.lo is None:
        return " (fewer than 2 valid runs a side)"
    return f" ({c.more} more runs each would likely decide)" if c.more else " (many more runs would be needed)"


def _num(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:.4g} {unit}"


def verdict_line(broken: list[tuple[Rule, Change]], rules: list[Rule]) -> str:
    if not rules:
        return "no --fail-on rules given"
    if not broken:
        return f"passed: {', '.join(r.text for r in rules)}"
    return "FAILED: " + "; ".join(f"{r.text} by {ch.cell} ({ch.figure} {ch.comparison.ratio})" for r, ch in broken)


def markdown(base: str, new: str, changes: list[Change], alone: list[str], broken, rules) -> str:
    """A pull-request comment: the verdict, then a table of every cell's figures."""
    lines = [f"### Arena: {code(new)} against {code(base)}", "", esc(verdict_line(broken, rules)), "",
             "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(esc(x) for x in row) + " |" for row in rows(changes)]
    lines += [""] + [f"- {esc(a)}" for a in alone] if alone else []
    lines += ["", "Ratios are of geometric means with a 95% interval (Welch's t on log values); better or worse only "
                  "where the interval excludes 1 and the change is beyond the practical threshold."]
    return "\n".join(lines) + "\n"


def compare_json(base: str, new: str, changes: list[Change], alone: list[str], broken, rules) -> dict[str, Any]:
    def one(ch: Change) -> dict[str, Any]:
        c = ch.comparison
        return {"cell": ch.cell, "figure": ch.figure, "base": ch.base, "new": ch.new,
                "ratio": c.ratio.value if c else None, "low": c.ratio.lo if c else None,
                "high": c.ratio.hi if c else None, "verdict": c.verdict if c else None,
                "more_runs": c.more if c else None}

    return {"schema": "arena/compare/1", "base": base, "new": new, "changes": [one(ch) for ch in changes],
            "alone": alone, "rules": [r.text for r in rules],
            "broken": [{"rule": r.text, "cell": ch.cell, "figure": ch.figure} for r, ch in broken]}


def junit(base: str, new: str, changes: list[Change], alone: list[str], broken, rules) -> str:
    """A test case per cell and figure: failed where it breaks a --fail-on rule, skipped where the
    comparison is undecided or cannot be made, passed otherwise."""
    failed = {(ch.cell, ch.figure): r.text for r, ch in broken}
    cases = []
    for ch, row in zip(changes, rows(changes)):
        c = ch.comparison
        why = failed.get((ch.cell, ch.figure))
        cases.append(Case(ch.cell, ch.figure,
                          failure=None if why is None else f"{why}: {ch.figure} {c.ratio} ({c.verdict})",
                          skipped=None if c is not None and c.verdict != "undecided" else
                          ("no comparison (a side has no valid run)" if c is None else f"undecided{_more(c)}"),
                          out=f"base {row[2]}, new {row[3]}, new / base {row[4]}, {row[5]}"))
    return document(f"arena compare {new} against {base}", cases)
