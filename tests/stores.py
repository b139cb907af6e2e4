"""Stores grown from the report tests' fixture (tests/fixtures/report/store.db: real runs of Puma and
gunicorn, 32 runs over 8 configurations) to any size, for the tests and benches/store_scale.py that
read stores at scale."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from arena.results.store import Store

FIXTURE = Path(__file__).parent / "fixtures" / "report" / "store.db"


def grow(path: Path, runs: int, configs: int) -> None:
    """A store at ``path`` of ``runs`` runs over ``configs`` configurations: the fixture's runs, each
    copy under its own run key; beyond the fixture's configurations, each copied under a new name
    ("... #k"), so that the cells, the tables and the charts grow with it."""
    shutil.copy(FIXTURE, path)
    Store(path).close()  # upgraded to this Arena's schema
    db = sqlite3.connect(path)
    columns = [r[1] for r in db.execute("PRAGMA table_info(runs)") if r[1] != "id"]
    base = [dict(zip(columns, r)) for r in db.execute(f"SELECT {', '.join(columns)} FROM runs ORDER BY started_at")]
    by_config: dict[str, list[dict]] = {}
    for r in base:
        by_config.setdefault(r["config"], []).append(r)
    names = list(by_config)
    rows = []
    for i in range(runs):
        c = i % configs  # the configuration this run is of: a fixture configuration, c % (their count), copied c // (their count) times
        mine = by_config[names[c % len(names)]]
        k, n = c // len(names), i // configs  # copy, and this configuration's n-th run
        r = dict(mine[n % len(mine)])
        suffix = f" #{k}" if k else ""
        r.update(config=r["config"] + suffix, label=r["label"] + suffix, run_key=f"{r['run_key']}{suffix}@{n}",
                 repetition=n // 2 + 1, started_at=r["started_at"] + i * 1e-3)
        rows.append(tuple(r[c] for c in columns))
    with db:
        db.execute("DELETE FROM runs")
        db.executemany(f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)
    db.execute("VACUUM")
    db.close()
