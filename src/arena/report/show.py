"""``arena show``'s formats: its table as terminal text, and for CI the answer as Markdown (a
pull-request comment or a job summary) and as JUnit XML (a test case per threshold and cell, per
capacity searched, and the goal). Formats only: the analysis (app/analysis.py) is computed once and
rendered here."""

from __future__ import annotations

import textwrap
from typing import Sequence

from arena.report.answer_view import answer_lines, threshold_lines
from arena.report.data import Table, comparison_table
from arena.report.junit import Case, document
from arena.report.markdown import code, escape as esc
from arena.report.tune_view import capacity_lines, capacity_text
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


def text_table(t: Table, title: str, width: int) -> str:
    """A table as terminal text in ``width`` columns: boxed as rich draws its tables (a heavy head),
    the widest columns narrowed until it fits and their cells folded onto more lines. Made here, a
    line at a time: rich measured and wrapped every cell, 2.5 s for a table of 1,000 rows."""
    columns = list(zip(t.head, *t.rows)) if t.rows else [(h,) for h in t.head]
    widths = [max(len(x) for x in col) for col in columns]
    words = [max(len(w) for x in col for w in x.split() or [""]) for col in columns]  # narrower breaks a word
    while sum(widths) + 3 * len(widths) + 1 > width:
        roomy = [i for i, w in enumerate(widths) if w > words[i]] or [i for i, w in enumerate(widths) if w > 6]
        if not roomy:
            break
        widths[max(roomy, key=widths.__getitem__)] -= 1

    def fold(x: str, w: int) -> list[str]:
        if len(x) <= w and x.isprintable() and x == x.strip():  # as it stands: what wrap would give, 10x sooner
            return [x]
        words = x.split()
        if not x.isprintable() or " ".join(words) != x or max(map(len, words)) > w:  # tabs, runs of spaces, long words
            return textwrap.wrap(x, w, break_long_words=True, break_on_hyphens=False) or [""]
        out = [words[0]]  # words each within w, one space apart: wrap's lines, filled word by word
        for word in words[1:]:
            if len(out[-1]) + 1 + len(word) <= w:
                out[-1] += " " + word
            else:
                out.append(word)
        return out

    def lines(row: Sequence[str], bar: str) -> list[str]:
        folded = [fold(x, w) for x, w in zip(row, widths)]
        return [bar + bar.join(f" {(f[i] if i < len(f) else ''):<{w}} " for f, w in zip(folded, widths)) + bar
                for i in range(max(len(f) for f in folded))]

    def rule(left: str, line: str, cross: str, right: str) -> str:
        return left + cross.join(line * (w + 2) for w in widths) + right

    top = rule("┏", "━", "┳", "┓")
    out = [title.center(len(top)).rstrip(), top, *lines(t.head, "┃"), rule("┡", "━", "╇", "┩")]
    for row in t.rows:
        out += lines(row, "│")
    out.append(rule("└", "─", "┴", "┘"))
    return "\n".join(out)
