"""The clients a workload's load stands for: whether they keep connections open, and how far and
how slow they are. arena-load emulates the link per connection (loopback has no network to
shape): a one-way delay each way and caps on the bytes per second sent and read.

One owner of the ``[clients]`` keys, their checks, and how a set of clients is named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

KEYS = ("keep_alive", "delay", "upload", "download")
MAX_DELAY_S = 60.0  # arena-load's bound
RATE_UNITS = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
SEGMENT = 1448  # arena-load's segment and receive buffer on a capped link (engine.rs)
SLOW_RCVBUF = 8 * 1024
RATE_FORM = "bytes per second such as \"64KiB/s\", \"1.5MB/s\" or 2000 (at least 1 B/s)"


@dataclass(frozen=True)
class Clients:
    keep_alive: bool = True
    delay_s: float = 0.0  # one way
    upload_bps: int | None = None  # None: no cap
    download_bps: int | None = None

    @property
    def link(self) -> bool:
        """Whether arena-load emulates a slow or far client."""
        return bool(self.delay_s or self.upload_bps or self.download_bps)

    @property
    def text(self) -> str:
        """"keep-alive" or "a connection per request", then the link when there is one:
        "keep-alive, 50 ms away, 64 KiB/s up, 256 KiB/s down"."""
        parts = ["keep-alive" if self.keep_alive else "a connection per request"]
        if self.delay_s:
            parts.append(f"{self.delay_s * 1e3:g} ms away")
        if self.upload_bps:
            parts.append(f"{rate_text(self.upload_bps)} up")
        if self.download_bps:
            parts.append(f"{rate_text(self.download_bps)} down")
        return ", ".join(parts)


def rate_text(bps: int) -> str:
    """2048 -> "2 KiB/s"; 1500000 -> "1.5 MB/s": the largest unit that shows it whole or nearly."""
    for unit in ("GiB", "GB", "MiB", "MB", "KiB", "KB"):
        n = bps / RATE_UNITS[unit]
        if n >= 1 and round(n, 2) == n:
            return f"{n:g} {unit}/s"
    return f"{bps} B/s"


def parse_rate(v: Any) -> int | None:
    """"64KiB/s", "1.5MB/s", "2000B/s", "256 KiB" or a number of bytes per second -> bytes per
    second (None when it is none of those, or below 1 B/s)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return int(v) if 1 <= v < 1e15 else None
    if not isinstance(v, str):
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(B|KB|MB|GB|KiB|MiB|GiB)?\s*(/s)?\s*", v)
    if not m:
        return None
    bps = float(m.group(1)) * RATE_UNITS[m.group(2) or "B"]
    return int(bps) if 1 <= bps < 1e15 else None


def clients(table: dict[str, Any], default: Clients, fail, duration) -> Clients:
    """A ``[clients]`` table (or a workload's ``clients``) over ``default``. ``fail(key, value,
    allowed)`` makes the one-line error; ``duration(key, most)`` reads a duration key."""
    for key, value in table.items():
        if key not in KEYS:
            raise fail(key, value, f"unknown key (allowed: {', '.join(sorted(KEYS))})")
    keep_alive = table.get("keep_alive", default.keep_alive)
    if not isinstance(keep_alive, bool):
        raise fail("keep_alive", keep_alive, "must be true or false")
    delay = duration("delay", MAX_DELAY_S) if "delay" in table else default.delay_s
    rates = {}
    for key in ("upload", "download"):
        if key in table:
            rates[key] = parse_rate(table[key])
            if rates[key] is None:
                raise fail(key, table[key], f"must be {RATE_FORM}")
    return Clients(keep_alive, delay, rates.get("upload", default.upload_bps), rates.get("download", default.download_bps))
