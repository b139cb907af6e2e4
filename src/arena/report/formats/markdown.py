"""Markdown: ``arena show`` and ``arena compare`` as a pull-request comment or a job summary.

Text is made safe here, once: GitHub renders the HTML a comment holds, so a label such as ``puma
<script>...`` must arrive as text, never as markup."""

from __future__ import annotations

import re

from arena.report.answer_view import answer_lines, threshold_lines
from arena.report.comparison_view import HEAD, rows, verdict_line
from arena.report.data import comparison_table
from arena.report.formats.registry import CompareView, Format, ShowView, register
from arena.report.tune_view import capacity_lines
from arena.results.validity import RULES

# CommonMark's backslash escapes for the punctuation that starts or ends markup inline (emphasis,
# links, code, tables); what starts HTML becomes an entity, which Markdown passes through as text: a
# "<" that opens a tag, a closing tag, a comment or a declaration (before a letter, "/", "!" or "?"),
# and an "&" that starts a character reference ("&amp;", "&#60;"). "p99>+10%" and "throughput<-5%"
# stay as written: they cannot be HTML. A leading ">" would quote, "#" head, "-" or "+" list.
_HTML = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?\w+;)")
_PUNCTUATION = re.compile(r"([\\`*_\[\]|~])")


def escape(text: object) -> str:
    """``text`` as Markdown that renders as exactly that text, on one line."""
    s = _HTML.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", " ".join(str(text).split("\n")))
    s = _PUNCTUATION.sub(r"\\\1", s)
    return "\\" + s if s.startswith((">", "#", "-", "+")) else s


def code(text: object) -> str:
    """``text`` as an inline code span: its fence one backtick longer than any run of backticks in it
    (CommonMark), so nothing in it can end the span early; inside one, HTML is shown, not rendered."""
    s = " ".join(str(text).split("\n"))
    fence = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def rules_table(settings: dict[str, float]) -> str:
    """The validity rules (results/validity.py RULES) as the reference's table, in their order (the
    first cause first): each rule's kind and when it makes a run invalid, with the thresholds of
    ``settings`` (the experiment keys' defaults)."""
    rows = ["| kind (as the answer counts runs left out) | a run is invalid when |", "| --- | --- |"]
    rows += [f"| {escape(rule.kind)} | {escape(rule.text(settings))} |" for rule in RULES]
    return "\n".join(rows)


def show(v: ShowView) -> str:
    """The answer, capacities and thresholds as a list, then the comparison table."""
    lines = [f"### Arena: {code(v.name)}", ""]
    for a in v.answers:
        lines += [f"- {escape(line)}" for line in answer_lines(a, len(v.answers) > 1)]
    lines += [f"- {escape(line)}" for line in capacity_lines(v.capacities) + threshold_lines(v.thresholds)]
    table = comparison_table(list(v.cells))
    lines += ["", "| " + " | ".join(escape(h) for h in table.head) + " |", "|" + "---|" * len(table.head)]
    lines += ["| " + " | ".join(escape(x) for x in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def compare(v: CompareView) -> str:
    """A pull-request comment: the verdict, then a table of every cell's figures."""
    lines = [f"### Arena: {code(v.new)} against {code(v.base)}", "", escape(verdict_line(v.broken, v.rules)), "",
             "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(escape(x) for x in row) + " |" for row in rows(v.changes)]
    lines += [""] + [f"- {escape(a)}" for a in v.alone] if v.alone else []
    lines += ["", "Ratios are of geometric means with a 95% interval (Welch's t on log values); better or worse only "
                  "where the interval excludes 1 and the change is beyond the practical threshold."]
    return "\n".join(lines) + "\n"


register(Format("markdown", "a pull-request comment or job summary", {"show": show, "compare": compare}))
