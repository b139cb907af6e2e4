"""`arena mix from-log` on a generated 100,000-line combined log (tests/test_traffic.py's, with known
weights and id ranges), timed beside the shell pipeline people reach for to count a log's paths
(`awk '{print $6, $7}' | sort | uniq -c`, which groups no ids and keeps user data) in one run.

    .venv/bin/python benches/log_mix.py [--lines 100000] [--rounds 3]

Prints lines per second for the parse alone, the templating alone and the command end to end
(median of the rounds), and the ratio to the pipeline. Goal: parsing at 200,000 lines/s or more.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from arena.traffic import logs  # noqa: E402
from arena.traffic.templates import build  # noqa: E402
from tests.test_traffic import combined_log  # noqa: E402


def timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    lines, _, _ = combined_log(args.lines)
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "access.log"
        log.write_text("\n".join(lines) + "\n")
        entries = [e for e in logs.read(lines, "combined") if isinstance(e, logs.Entry)]
        parse, template, command, shell = [], [], [], []
        for _ in range(args.rounds):
            parse.append(timed(lambda: list(logs.read(lines, "combined"))))
            template.append(timed(lambda: build(entries)))
            command.append(timed(lambda: subprocess.run(
                [str(ROOT / ".venv" / "bin" / "arena"), "mix", "from-log", str(log), "-o", f"{d}/mix.toml"],
                check=True, capture_output=True)))
            shell.append(timed(lambda: subprocess.run(f"awk '{{print $6, $7}}' {log} | sort | uniq -c > {d}/paths",
                                                      shell=True, check=True)))
    n = args.lines
    rate = {k: n / statistics.median(v) for k, v in
            (("parse", parse), ("template", template), ("command", command), ("shell", shell))}
    print(f"{n:,} lines, median of {args.rounds} rounds (lines/s):")
    print(f"  parse (traffic.logs)         {rate['parse']:>12,.0f}   goal 200,000: {'met' if rate['parse'] >= 2e5 else 'missed'}")
    print(f"  templates (traffic.templates){rate['template']:>12,.0f}")
    print(f"  arena mix from-log, end to end {rate['command']:>10,.0f}   (interpreter start included)")
    print(f"  awk | sort | uniq -c         {rate['shell']:>12,.0f}")
    print(f"  ratio from-log / shell pipeline: {rate['command'] / rate['shell']:.2f}")
    return 0 if rate["parse"] >= 2e5 else 1


if __name__ == "__main__":
    sys.exit(main())
