"""``arena reproduce STUDY --json`` (schemas/reproduce.schema.json): each published row beside what
was measured here and what the model predicts for the original conditions, with a verdict per
figure, and the rank agreement per figure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arena.reproduce.verdicts import Comparison


def reproduce_json(c: Comparison) -> dict[str, Any]:
    s = c.study
    return {
        "schema": "arena/reproduce/1", "study": s.id, "title": s.title, "source": s.citation, "year": s.year,
        "here_cpus": c.here_cpus,
        "rows": [{"published_row": line.row.index, "row": line.row.text, "status": line.status,
                  "why": line.why, "configuration": line.label or None, "level": line.level,
                  "published": dict(line.published), "measured": dict(line.measured), "model": dict(line.model),
                  "beyond_model": line.beyond_model or None,
                  "version_changes": [{"server": b.change.server, "version": b.change.version,
                                       "released": b.change.released, "perhaps": b.perhaps, "change": b.change.change,
                                       "touches": b.change.touches, "source": b.change.source} for b in line.changes],
                  "verdicts": {figure: {"agrees": v.agrees, "reason": v.reason, "kind": v.kind or None,
                                        "causes": [{"kind": c.kind, "change": c.change, "estimate": c.estimate,
                                                    "explains": c.explains} for c in v.causes]}
                               for figure, v in line.verdicts.items()}}
                 for line in c.lines],
        "rank_agreement": [{"figure": t.figure, "kendall_tau": t.tau, "p_value": t.p_value, "rows": t.n}
                           for t in c.taus],
    }
