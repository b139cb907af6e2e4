"""``arena show`` for CI: the answer as Markdown (a pull-request comment or a job summary) and as
JUnit XML (a test case per threshold and cell, per capacity searched, and the goal). Formats only:
the analysis (app/analysis.py) is computed once and rendered here."""

from __future__ import annotations

from typing import Sequence

from arena.report.answer import answer_lines, threshold_lines
from arena.report.data import comparison_table
from arena.report.junit import Case, document
from arena.report.markdown import code, escape as esc
from arena.report.tune import capacity_lines, capacity_text
from arena.results.aggregate import FIGURES


def markdown(name: str, answers: Sequence, thresholds: Sequence, capacities: Sequence, cells: list) -> str:
    lines = [f"### Arena: {code(name)}", ""]
    for a in answers:
        lines += [f"- {esc(line)}" for line in answer_lines(a, len(answers) > 1)]
    lines += [f"- {esc(line)}" for line in capacity_lines(capacities) + threshold_lines(thresholds)]
    table = comparison_table(cells)
    lines += ["", "| " + " | ".join(esc(h) for h in table.head) + " |", "|" + "---|" * len(table.head)]
    lines += ["| " + " | ".join(esc(x) for x in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def junit(name: str, answers: Sequence, thresholds: Sequence, capacities: Sequence) -> str:
    """Each threshold on each cell (failed where it does not hold, skipped where the cell has no such
    figure), each capacity searched (failed where none was found), and, per workload, whether any
    configuration keeps within the goal."""
    cases = []
    for o in thresholds:
        unit = FIGURES[o.threshold.figure][0]
        value = "-" if o.value is None else f"{o.value:.4g} {unit}"
        cases.append(Case(f"{o.cell.label} at {o.cell.level_label}", f"threshold {o.threshold.text}",
                          failure=None if o.passed is not False else f"{o.threshold.figure} {value}: {o.threshold.text} "
                                                                      "does not hold",
                          skipped="no such figure (no valid run)" if o.passed is None else None, out=value))
    for label, workload, cap in capacities:
        cases.append(Case(label, f"capacity ({workload})", failure=None if cap.lo is not None else
                          "no rate kept within the goal", out=capacity_text(cap)))
    for a in answers:
        best = a.best
        cases.append(Case(f"{name} {a.workload}", f"a configuration within the goal ({a.goal})",
                          failure=None if best is not None else f"none keeps within the goal ({a.goal})",
                          out=answer_lines(a, False)[0]))
    return document(f"arena show {name}", cases)
