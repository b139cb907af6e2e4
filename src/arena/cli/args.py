"""Argument types shared by the commands: each refuses bad input in one line naming the flag."""

from __future__ import annotations

import argparse
import math

from arena.errors import ArenaError
from arena.servers.cgroup import parse_cpu_list

EXIT_ERROR, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED = 2, 1, 130, 143


def count(flag: str, lo: int = 1, hi: int = 4096):
    def parse(text: str) -> int:
        if not text.isdigit() or not lo <= int(text) <= hi:
            raise argparse.ArgumentTypeError(f"must be a whole number from {lo} to {hi}, got '{text}'")
        return int(text)

    parse.__name__ = flag
    return parse


def positive(flag: str, zero: bool = False):
    """A finite number above 0 (or from 0 with ``zero``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (value >= 0 if zero else value > 0) or value == math.inf:
            raise argparse.ArgumentTypeError(f"must be a number {'>= 0' if zero else 'above 0'}, got '{text}'")
        return value

    parse.__name__ = flag
    return parse


def duration(flag: str):
    """``10s``, ``500ms``, ``2m`` or a plain number of seconds -> seconds (experiment files' rule)."""
    from arena.plan.experiment import parse_duration

    def parse(text: str) -> float:
        value = parse_duration(text)
        if value is None or value >= 10**9:
            raise argparse.ArgumentTypeError(f"must be a duration such as 10s, 500ms or 2m, got '{text}'")
        return value

    parse.__name__ = flag
    return parse


def listof(item):
    """A comma-separated list of ``item``s: '1,8,32'."""
    def parse(text: str) -> list:
        return [item(part.strip()) for part in text.split(",") if part.strip()] or [item("")]

    parse.__name__ = getattr(item, "__name__", "list")
    return parse


def cpus(text: str) -> list[int]:
    try:
        return parse_cpu_list(text)
    except ArenaError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--cpus: ")) from None


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, like every other Arena error
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def add_knobs(p: argparse.ArgumentParser) -> None:
    """The server knobs (catalog.KNOBS) and the server's CPUs."""
    p.add_argument("--processes", type=count("--processes"), help="worker processes")
    p.add_argument("--threads", type=count("--threads"), help="threads per process")
    p.add_argument("--connections", type=count("--connections"), help="connection limit (where the server has one)")
    p.add_argument("--cpus", type=cpus, help="CPU list for the server, e.g. 1 or 0-1 (default: all)")


def add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default="arena.db", help="results store (default arena.db)")


def write(path: str, text: str, flag: str) -> None:
    """Write a file the user named; a failure is a one-line error naming the flag."""
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise ArenaError(f"{flag} {path}: cannot write it ({e.strerror})") from None
