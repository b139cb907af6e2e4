"""A comparison of two experiments (results/comparison.py) as rows, its verdict line and JSON
(schemas/compare.schema.json); as Markdown and JUnit XML: report/formats/. Formats only."""

from __future__ import annotations

from typing import Any

from arena.results.aggregate import FIGURES
from arena.results.comparison import Change, Rule

HEAD = ("cell", "figure", "base", "new", "new / base", "verdict")


def rows(changes: list[Change]) -> list[list[str]]:
    out = []
    for ch in changes:
        unit = FIGURES[ch.figure][0]
        c = ch.comparison
        out.append([ch.cell, ch.figure, _num(ch.base, unit), _num(ch.new, unit), "-" if c is None else str(c.ratio),
                    "-" if c is None else c.verdict + more(c)])
    return out


def more(c) -> str:
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
