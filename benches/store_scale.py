"""Reading a results store at scale: `arena show`, `arena report` and `arena export --format csv`
on stores grown from the report tests' fixture (tests/stores.py: real runs of Puma and gunicorn,
32 runs over 8 configurations), each timed with its peak RSS from wait4 and set
beside the floor of the same store read by SQLite's own shell (`sqlite3 -csv` of the runs table:
every row and column decoded, nothing analysed).

A grown store repeats the fixture's runs, each copy under its own run key; with more
configurations than the fixture's 8, each configuration is copied under a new name ("... #k"), so
the cells, the tables and the charts grow with it.

    python benches/store_scale.py [--sizes 1000x500 10000x16 ...] [--cpu 1] [--runs 3] [--keep DIR]

Each command runs once uncounted, then --runs times; the table shows its median wall time and the
highest peak RSS.

Targets on a 2-core machine: show <= 1 s at 1,000 runs and <= 3 s at 10,000; report <= 5 s at
1,000 runs over 500 configurations and <= 15 s at 10,000 runs; export csv <= 5 s at 10,000 runs;
peak RSS <= 400 MB at 10,000 runs; the report's page <= 5 MB at 500 configurations. Exits 1 when
one is missed.
"""

from __future__ import annotations

import argparse
import compileall
import dataclasses
import os
import shutil
import sys
import tempfile
from pathlib import Path

from harness import ROOT, run_pinned

sys.path.insert(0, str(ROOT))
from tests.stores import grow  # noqa: E402
ARENA = [str(ROOT / ".venv" / "bin" / "arena")]
SIZES = ("32x16", "1000x500", "1000x16", "3200x1600", "10000x16")
# (command, runs, configurations) -> the most seconds it may take; None: any
TARGETS_S = {("show", 1000): 1.0, ("show", 10000): 3.0, ("report", 1000, 500): 5.0, ("report", 10000): 15.0,
             ("report", 32): 3.0, ("export", 10000): 5.0}
RSS_MB, PAGE_MB, PAGE_CONFIGS = 400, 5.0, 500


def measure(argv: list[str], cpu: int, runs: int, warmup: int = 1):
    """``argv`` run ``warmup`` times uncounted, then ``runs`` times (as hyperfine --warmup does, on a
    machine whose speed wanders: here the first runs after a store is grown took up to half as long
    again, a report of 1,000 runs 6.2 s and then 4.2 s): the run of median wall time, with the
    highest peak RSS of them all."""
    for _ in range(warmup):
        run_pinned(argv, cpu, timeout=900)
    got = []
    for _ in range(runs):
        u = run_pinned(argv, cpu, timeout=900)
        if u.code != 0:
            sys.exit(f"benchmark: {' '.join(argv)} exited {u.code}: {u.err.strip()[-400:]}")
        got.append(u)
    middle = sorted(got, key=lambda u: u.wall_s)[len(got) // 2]
    return dataclasses.replace(middle, max_rss_kib=max(u.max_rss_kib for u in got))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=list(SIZES), help="RUNSxCONFIGURATIONS (default: %(default)s)")
    p.add_argument("--cpu", type=int, default=1, help="the CPU every command is pinned to")
    p.add_argument("--skip", nargs="*", default=[], choices=["show", "report", "export"])
    p.add_argument("--keep", help="keep the grown stores and outputs in this directory")
    p.add_argument("--runs", type=int, default=5, help="times each command runs; its median is shown (default: 5)")
    args = p.parse_args()
    if shutil.which("sqlite3") is None:
        sys.exit("benchmark: the sqlite3 shell is missing (apt-get install -y sqlite3)")
    # Arena's modules as an installed copy has them: byte-compiled (pip compiles at install). A checkout
    # run with PYTHONDONTWRITEBYTECODE set would compile each changed module again in every command
    # timed (0.1 s of show's 0.9 s at 1,000 runs, measured).
    compileall.compile_dir(str(ROOT / "src" / "arena"), quiet=1)
    where = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="arena-store-scale-"))
    where.mkdir(parents=True, exist_ok=True)
    missed = []
    print(f"{'runs':>6} {'configs':>7} {'store MB':>8} {'sqlite3 -csv':>12} | {'show':>13} | {'report':>13} "
          f"{'page MB':>7} | {'export csv':>13} | {'x sqlite3':>9}")
    try:
        for size in args.sizes:
            runs, configs = map(int, size.split("x"))
            db = where / f"store-{runs}x{configs}.db"
            grow(db, runs, configs)
            os.sync()  # the grown store written out now, not by the kernel while a command is timed
            env = {**os.environ, "COLUMNS": "120"}
            os.environ.update(env)
            floor = measure(["sqlite3", "-csv", str(db), "SELECT * FROM runs"], args.cpu, args.runs)
            got = {}
            if "show" not in args.skip:
                got["show"] = measure([*ARENA, "show", "--store", str(db)], args.cpu, args.runs)
            page = None
            if "report" not in args.skip:
                out = where / f"report-{runs}x{configs}.html"
                got["report"] = measure([*ARENA, "report", "--store", str(db), "-o", str(out)], args.cpu, args.runs)
                page = out.stat().st_size / 1e6
            if "export" not in args.skip:
                got["export"] = measure([*ARENA, "export", "tiny-grid", "--store", str(db), "--format", "csv"], args.cpu,
                                        args.runs)

            def cell(name):
                u = got.get(name)
                return f"{u.wall_s:5.1f} s {u.max_rss_kib / 1024:4.0f} MB" if u else f"{'-':>13}"

            ratio = got["export"].wall_s / floor.wall_s if "export" in got else None
            print(f"{runs:6d} {configs:7d} {db.stat().st_size / 1e6:8.1f} {floor.wall_s:10.2f} s | {cell('show')} | "
                  f"{cell('report')} {page if page is not None else float('nan'):7.1f} | {cell('export')} | "
                  f"{ratio if ratio else float('nan'):8.1f}x", flush=True)
            for name, u in got.items():
                for key in ((name, runs, configs), (name, runs)):
                    if key in TARGETS_S and u.wall_s > TARGETS_S[key]:
                        missed.append(f"{name} at {runs} runs / {configs} configurations took {u.wall_s:.1f} s "
                                      f"(target {TARGETS_S[key]:g} s)")
                        break
                if runs >= 10000 and u.max_rss_kib / 1024 > RSS_MB:
                    missed.append(f"{name} at {runs} runs took {u.max_rss_kib / 1024:.0f} MB (target {RSS_MB} MB)")
            if page is not None and configs == PAGE_CONFIGS and page > PAGE_MB:
                missed.append(f"the report at {configs} configurations is {page:.1f} MB (target {PAGE_MB:g} MB)")
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)
    for m in missed:
        print("missed:", m)
    if missed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
