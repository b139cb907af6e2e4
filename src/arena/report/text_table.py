"""A table as terminal text, made a line at a time (``arena show``'s comparison table, ``arena
reproduce``'s): rich measured and wrapped every cell, 2.5 s for a table of 1,000 rows."""

from __future__ import annotations

import textwrap
from typing import Sequence

from arena.report.data import Table


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
