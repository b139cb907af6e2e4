"""Text made safe for Markdown (a pull-request comment, a job summary): GitHub renders the HTML a
comment holds, so a label such as ``puma <script>...`` must arrive as text, never as markup. The
one place the Markdown renderers (report/show.py, report/comparison_view.py) escape what they print."""

from __future__ import annotations

import re

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
