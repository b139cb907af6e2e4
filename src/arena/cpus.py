"""CPU lists as Linux writes them ("0-2,5"): parsed, checked against this process's CPUs, written
back. Pure but for the affinity check; used by the plan, the servers' confinement and the results."""

from __future__ import annotations

import os
import re
from typing import Iterable

from arena.errors import ArenaError


def cpu_list(text: str, flag: str = "--cpus") -> list[int]:
    """Pure: ``"0-2,5"`` -> [0, 1, 2, 5]."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise ArenaError(f"{flag}: must be a CPU list such as 0 or 0-1,3, got '{text}'")
        cpus.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return sorted(cpus)


def parse_cpu_list(text: str, flag: str = "--cpus") -> list[int]:
    """``"0-2,5"`` -> [0, 1, 2, 5]; every CPU must be one this process may run on."""
    cpus = set(cpu_list(text, flag))
    allowed = os.sched_getaffinity(0)
    missing = sorted(cpus - allowed)
    if missing:
        raise ArenaError(f"{flag}: CPU {missing[0]} is not available, got '{text}' "
                         f"(available: {format_cpu_list(allowed)})")
    return sorted(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> ``"0-2,5"``."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            out.append(_span(run))
            run = []
        run.append(c)
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
