"""Capacity searches as text (arena run of a find = "capacity" file, arena tune)."""

from __future__ import annotations


def capacity_text(cap) -> str:
    """"180 req/s (between 180 and 195: the highest rate within the goal, the lowest beyond it)"."""
    if cap is None or cap.lo is None:
        return "none found"
    if cap.hi is None:
        return f"at least {cap.lo:g} req/s (no rate tried failed)"
    sure = f"confirmed over {cap.runs_at_lo} runs" if cap.confirmed else f"{cap.runs_at_lo} run(s), not confirmed"
    return (f"{cap.lo:g} req/s (interval {cap.lo:g} .. {cap.hi:g}: the highest rate within the goal, {sure}; "
            f"the lowest rate beyond it)")
