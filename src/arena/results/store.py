"""The results store: SQLite, one file (``arena.db`` by default), a schema version and migrations.

Every run is committed the moment it ends, with the environment it ran in, so an interrupted
sweep keeps every finished run and ``arena run`` resumes by skipping the run keys already stored.
A store written by a newer Arena is refused, never misread. Runs come back typed (results/runs.py),
each decoded once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import os
import sqlite3
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from arena.atomic import write_file
from arena.errors import ArenaError, NotSaved, did_you_mean
from arena.results.load_result import LoadFigures, from_dict, summary
from arena.results.runs import FAILURE_COLUMNS, Environment, Failure, Run, decode, schema_problem


def _summaries(db: sqlite3.Connection) -> None:
    """13: each run's load document as the analysis reads it (results/load_result.py summary), beside the
    whole one: reading a store decoded every run's whole document, the tool's own copy of it
    included (a report of 1,000 runs read 17 MB of JSON for 6 MB it used). Filled in for the runs
    stored before it."""
    db.execute("ALTER TABLE runs ADD COLUMN summary TEXT NOT NULL DEFAULT 'null'")
    _fill(db, "summary", "load", _summary_text)


def _summary_text(load: dict[str, Any] | None) -> str:
    return json.dumps(summary(load) if load else None)


def _figures(db: sqlite3.Connection) -> None:
    """15: each run's figures that its cell reads (results/load_result.py LoadFigures), beside its load
    result, which is then decoded only where something reads it: `arena show` of 10,000 runs
    decoded 10,000 load results to read five figures of each. Filled in for the runs stored before
    it, from their summaries."""
    db.execute("ALTER TABLE runs ADD COLUMN figures TEXT NOT NULL DEFAULT 'null'")
    _fill(db, "figures", "summary", _figures_text)


def _spread_figures(db: sqlite3.Connection) -> None:
    """16: the kept-alive connections' spread (results/load_result.py ConnectionSpread) among each run's
    figures: the keep-alive detector read it from each run's load result, which decoded every valid
    run's (150 ms of `arena show`'s 1 s at 1,000 runs). Filled in again for the runs stored before
    it, from their summaries."""
    _fill(db, "figures", "summary", _figures_text)


def _figures_text(load: dict[str, Any] | None) -> str:
    return json.dumps(dataclasses.asdict(LoadFigures.of(from_dict(load))) if load else None)


def _fill(db: sqlite3.Connection, column: str, source: str, text: Callable[[Any], str]) -> None:
    """Each stored run's ``column`` made by ``text`` from its parsed ``source`` column, 500 runs at a
    time (a store of 10,000 runs is never read whole)."""
    last = 0
    while True:
        batch = db.execute(f"SELECT id, {source} FROM runs WHERE id > ? ORDER BY id LIMIT 500", (last,)).fetchall()
        if not batch:
            return
        db.executemany(f"UPDATE runs SET {column} = ? WHERE id = ?", [(text(json.loads(doc)), i) for i, doc in batch])
        last = batch[-1][0]


# The cause of each flag stored before its kind was (a store below version 14, an export or a rescue
# file from then), read from its wording then: its rule's kind (results/validity.py RULES), the first
# text it holds; a wording of none of them is its own kind.
WORDING_BEFORE_14 = (
    ("no answer at all", "no answer"), ("no request succeeded", "no request succeeded"),
    ("generator saturated", "generator saturated"), ("load host ", "a load host's problem"),
    ("could not open every connection", "connections not opened"), ("the server died", "the server died"),
    ("processes exited during the run", "a server process exited"), ("errors ", "errors"),
    ("requests due were never sent", "requests never sent"), ("before the time limit", "the time limit"),
    ("stalled:", "a stall"), ("throughput drifted", "throughput drifted"),
    ("other processes took", "a neighbour shared the CPUs"), ("the machine ran", "a slower machine"))


def kinds_before_14(flags: list[str]) -> list[str]:
    """The kinds of flags stored without them (WORDING_BEFORE_14)."""
    return [next((kind for text, kind in WORDING_BEFORE_14 if text in f), f) for f in flags]


def _flag_kinds(db: sqlite3.Connection) -> None:
    """14: each flag's kind beside it (results/validity.py Flag.kind), by which the answer counts
    the runs left out; filled in for the runs stored before it from their flags' wording."""
    db.execute("ALTER TABLE runs ADD COLUMN flag_kinds TEXT NOT NULL DEFAULT '[]'")
    rows = db.execute("SELECT id, flags FROM runs WHERE flags != '[]'").fetchall()
    db.executemany("UPDATE runs SET flag_kinds = ? WHERE id = ?",
                   [(json.dumps(kinds_before_14(json.loads(flags))), i) for i, flags in rows])


# Each entry upgrades the schema by one version; a store at version v gets MIGRATIONS[v:]. An entry
# is SQL, or a function of the connection where the new columns are computed from the stored ones.
MIGRATIONS: list[str | Callable[[sqlite3.Connection], None]] = [
    # 1: experiments and runs
    """
    CREATE TABLE experiments (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        file TEXT NOT NULL,
        definition TEXT NOT NULL,          -- the experiment file's content, as parsed (JSON)
        created_at REAL NOT NULL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        run_key TEXT NOT NULL,
        config TEXT NOT NULL,              -- ServerConfig.key
        label TEXT NOT NULL,
        server TEXT NOT NULL,
        app TEXT NOT NULL,
        processes INTEGER, threads INTEGER, connections INTEGER,
        model TEXT NOT NULL, level REAL NOT NULL, repetition INTEGER NOT NULL,
        driver TEXT NOT NULL,
        started_at REAL NOT NULL,
        server_reused INTEGER NOT NULL,    -- 1 when an earlier level's server start served this run
        valid INTEGER NOT NULL,
        flags TEXT NOT NULL,               -- JSON list of validity problems
        throughput REAL, p50_us INTEGER, p90_us INTEGER, p99_us INTEGER, errors INTEGER,
        cpu_s REAL, pss_bytes INTEGER, uss_bytes INTEGER,
        load TEXT NOT NULL,                -- the driver's LoadResult document (JSON)
        resources TEXT NOT NULL,           -- the probe's ResourceResult (JSON)
        environment TEXT NOT NULL,         -- machine, versions, CPU layout (JSON)
        UNIQUE (experiment_id, run_key)
    );
    """,
    # 2: experiments with several workloads; runs stored before it had the one "default" workload
    """
    ALTER TABLE runs ADD COLUMN workload TEXT NOT NULL DEFAULT 'default';
    """,
    # 3: the services' resources over each run's window (JSON: kind -> the probe's result)
    """
    ALTER TABLE runs ADD COLUMN services TEXT NOT NULL DEFAULT '{}';
    """,
    # 4: the database pool per process, and the connections the server's processes may open together
    """
    ALTER TABLE runs ADD COLUMN pool INTEGER;
    ALTER TABLE runs ADD COLUMN db_connections INTEGER;
    """,
    # 5: the database's max_connections, and the connections it refused during the run (count, first message)
    """
    ALTER TABLE runs ADD COLUMN db_max_connections INTEGER;
    ALTER TABLE runs ADD COLUMN db_refused INTEGER;
    ALTER TABLE runs ADD COLUMN db_refused_first TEXT;
    """,
    # 6: the machine's speed check around the run (the slower of before and after, ms)
    """
    ALTER TABLE runs ADD COLUMN speed_ms REAL;
    """,
    # 7: how the server was started (JSON: argv, cwd, env)
    """
    ALTER TABLE runs ADD COLUMN launch TEXT NOT NULL DEFAULT '{}';
    """,
    # 8: the front's figures over the run's window (JSON: a balancer's requests and queue time, per instance)
    """
    ALTER TABLE runs ADD COLUMN topology TEXT NOT NULL DEFAULT '{}';
    """,
    # 9: runs that could not be made (a server that did not start, a driver that failed), with why;
    # not runs: the next `arena run` tries them again, and a run stored later supersedes them
    """
    CREATE TABLE failures (
        id INTEGER PRIMARY KEY,
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        run_key TEXT NOT NULL,
        config TEXT NOT NULL, label TEXT NOT NULL, server TEXT NOT NULL, app TEXT NOT NULL,
        workload TEXT NOT NULL, processes INTEGER, threads INTEGER, connections INTEGER,
        model TEXT NOT NULL, level REAL NOT NULL, repetition INTEGER NOT NULL,
        failed_at REAL NOT NULL,
        stage TEXT NOT NULL,               -- Failure.stage: start, service, driver, server died
        reason TEXT NOT NULL,              -- one line: what failed and the exception it ended in
        log_tail TEXT NOT NULL,            -- the last lines of the server's log ('' where none)
        log_path TEXT                      -- where the whole log was kept
    );
    """,
    # 10: cores that processes other than Arena's kept busy on the run's CPUs over its window (speed.py);
    # from now on speed_ms is the faster of the checks before and after the run
    """
    ALTER TABLE runs ADD COLUMN others_cores REAL;
    """,
    # 11: why a run beyond the plan was taken (arena run --until-decided); NULL for a planned run
    """
    ALTER TABLE runs ADD COLUMN why TEXT;
    """,
    # 12: the steps of a search (arena tune, [load] find = "capacity"): what it decided and why, in
    # order, per invocation (session: when it started); the report draws the latest as its path
    """
    CREATE TABLE steps (
        id INTEGER PRIMARY KEY,
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        session REAL NOT NULL,
        seq INTEGER NOT NULL,
        stage TEXT NOT NULL,               -- model/search.py Step.stage: race, drop, capacity, confirm, ...
        text TEXT NOT NULL,
        at REAL NOT NULL
    );
    """,
    _summaries,
    _flag_kinds,
    _figures,
    _spread_figures,
]
SCHEMA_VERSION = len(MIGRATIONS)
COMPUTED = ("summary", "figures")  # the columns save_run computes from a run's load result
DOCUMENTS = ("flags", "flag_kinds", "load", "resources", "environment", "services", "launch", "topology")  # the columns that hold JSON

RUN_COLUMNS = ("run_key", "config", "label", "server", "app", "workload", "processes", "threads", "connections", "model", "level",
               "repetition", "driver", "started_at", "server_reused", "valid", "flags", "throughput", "p50_us",
               "p90_us", "p99_us", "errors", "cpu_s", "pss_bytes", "uss_bytes", "load", "resources", "environment",
               "services", "pool", "db_connections", "db_max_connections", "db_refused", "db_refused_first",
               "speed_ms", "launch", "topology", "others_cores", "why", "flag_kinds")


class Store:
    """An open store. Read-only (``readonly``: show, report, export and the like) it is never
    written: a store of an older schema is upgraded in a copy in memory. Writable, it is checked
    before anything is measured (its directory exists, it can be written), an older schema is
    upgraded after a backup copy beside it (PATH.schemaN.bak), and each run is one transaction:
    a write that fails (a full disk, the store removed) raises NotSaved and leaves the store as it
    was before that run."""

    def __init__(self, path: str | Path, readonly: bool = False, flag: str = "--store", shown: str | None = None):
        self.path, self.readonly = str(path), readonly
        self._batched = False
        self.named = f"{flag} {shown or self.path}".lstrip()  # how errors name it: the flag (if any) and path given
        if Path(self.path).is_dir():
            raise ArenaError(f"{self.named}: is a directory (give the store's file, such as {Path(self.path) / 'arena.db'})")
        if not readonly:
            where = Path(self.path).resolve().parent
            if not where.is_dir():
                raise ArenaError(f"{self.named}: its directory {where} does not exist")
        try:
            self.db = (sqlite3.connect(f"{Path(self.path).resolve().as_uri()}?mode=ro", uri=True) if readonly
                       else sqlite3.connect(self.path))
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA foreign_keys = ON")
            version = self._version()
            if not readonly:
                self.db.execute("BEGIN IMMEDIATE")  # takes the write lock: refused on a store we cannot write
                self.db.execute("ROLLBACK")
        except sqlite3.Error as e:
            raise ArenaError(f"{self.named}: cannot {'read' if readonly else 'write'} it ({e})") from None
        if version < SCHEMA_VERSION:
            if readonly:
                self._in_memory()
            elif version > 0:
                self._backup(version)
        self._migrate(version)
        self._columns = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}  # save_run computes COMPUTED
        self._inode = os.stat(self.path).st_ino

    def _version(self) -> int:
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise ArenaError(f"{self.named}: not an Arena store ({e})") from None
        if version == 0:
            foreign = [r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            if foreign:  # an SQLite file of something else: never add Arena's tables to it
                raise ArenaError(f"{self.named}: not an Arena store (an SQLite file with other tables: "
                                 f"{', '.join(foreign[:5])})")
            if self.readonly:
                raise ArenaError(f"{self.named}: not an Arena store (an empty file: no experiment has run into it)")
        if version > SCHEMA_VERSION:
            raise ArenaError(f"{self.named}: schema version {version} is newer than this Arena's "
                             f"({SCHEMA_VERSION}); use a newer Arena or another store")
        return version

    def _in_memory(self) -> None:
        """Read an older store through an upgraded copy in memory (the file stays as it is)."""
        memory = sqlite3.connect(":memory:")
        self.db.backup(memory)
        self.db.close()
        self.db = memory
        self.db.row_factory = sqlite3.Row

    def _backup(self, version: int) -> None:
        """A copy of the store as it is, before it is upgraded from ``version``."""
        copy = f"{self.path}.schema{version}.bak"
        try:
            with sqlite3.connect(copy) as target:
                self.db.backup(target)
            target.close()
        except sqlite3.Error as e:
            raise ArenaError(f"{self.named}: cannot keep a copy before upgrading it from schema {version} "
                             f"({copy}: {e})") from None

    def _migrate(self, version: int) -> None:
        for v in range(version, SCHEMA_VERSION):
            step = MIGRATIONS[v]
            try:  # one transaction per step: a store is never half-upgraded
                if callable(step):
                    self.db.execute("BEGIN")
                    step(self.db)
                    self.db.execute(f"PRAGMA user_version = {v + 1}")
                    self.db.execute("COMMIT")
                else:
                    self.db.executescript(f"BEGIN; {step}; PRAGMA user_version = {v + 1}; COMMIT;")
            except (sqlite3.Error, ValueError) as e:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise ArenaError(f"{self.named}: upgrading to schema {v + 1} failed: {e}") from None

    def _write(self, sql: str, values: tuple, *more: tuple[str, tuple]) -> None:
        """One statement (and ``more``) in one transaction; NotSaved where it cannot be (a full or
        read-only disk, the store's file removed or replaced since it was opened: SQLite would write
        into a deleted file)."""
        try:
            if os.stat(self.path).st_ino != self._inode:
                raise FileNotFoundError("it was replaced")
        except FileNotFoundError as e:
            raise NotSaved(f"{self.named}: the store's file is gone ({e.strerror or e})") from None
        try:
            with self._transaction():
                for statement, args in ((sql, values), *more):
                    self.db.execute(statement, args)
        except sqlite3.Error as e:
            raise NotSaved(f"{self.named}: cannot write it ({e})") from None

    def _transaction(self):
        """What a write runs in: its own transaction, committed at its end, or inside one_transaction
        the batch's, which commits once at the end of the batch."""
        return contextlib.nullcontext() if self._batched else self.db

    @property
    def version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ experiments

    def experiment_id(self, name: str, file: str, definition: dict[str, Any]) -> int:
        """The id of experiment ``name``, created on first use. A stored definition that differs
        from this one is refused: its runs would not be comparable (rename it, or use another store)."""
        text = json.dumps(definition, sort_keys=True)
        row = self.db.execute("SELECT id, definition FROM experiments WHERE name = ?", (name,)).fetchone()
        if row is not None:
            if row["definition"] != text:
                raise ArenaError(f"{file}: name = \"{name}\": the store {self.path} holds an experiment of that name with "
                                 "a different definition; give this one another name")
            return row["id"]
        insert = ("INSERT INTO experiments (name, file, definition, created_at) VALUES (?, ?, ?, ?)",
                  (name, file, text, time.time()))
        try:
            with self._transaction():
                return self.db.execute(*insert).lastrowid
        except sqlite3.Error as e:
            raise ArenaError(f"{self.named}: cannot write it ({e})") from None

    def experiments(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT e.name, e.file, e.created_at, COUNT(r.id) AS runs, COALESCE(SUM(r.valid), 0) AS valid, "
            "MAX(r.started_at) AS last_run FROM experiments e LEFT JOIN runs r ON r.experiment_id = e.id "
            "GROUP BY e.id ORDER BY e.created_at").fetchall()
        return [dict(r) for r in rows]

    def definition(self, name: str) -> dict[str, Any]:
        return json.loads(self._experiment(name)["definition"])

    def file(self, name: str) -> str:
        """The experiment file it was run from (its app and mix paths are relative to it)."""
        return self._experiment(name)["file"]

    def _experiment(self, name: str):
        row = self.db.execute("SELECT file, definition FROM experiments WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise self._unknown(name)
        return row

    def _id(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM experiments WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise self._unknown(name)
        return row["id"]

    def _unknown(self, name: str) -> ArenaError:
        names = [e["name"] for e in self.experiments()]
        return ArenaError(f"experiment: no experiment named '{name}' in {self.path} "
                          f"({did_you_mean(name, names)}it has: {', '.join(names) or 'none'})")

    # ------------------------------------------------------------------ runs

    def started(self, experiment_id: int) -> dict[str, float]:
        """The stored runs' keys, each with when it started."""
        return {r[0]: r[1] for r in self.db.execute("SELECT run_key, started_at FROM runs WHERE experiment_id = ?",
                                                    (experiment_id,))}

    def failed_keys(self, experiment_id: int) -> set[tuple[str, float]]:
        """The stored failures, each as (run key, when it failed)."""
        return {(r[0], r[1]) for r in self.db.execute("SELECT run_key, failed_at FROM failures WHERE experiment_id = ?",
                                                      (experiment_id,))}

    def done_keys(self, experiment_id: int) -> dict[str, bool]:
        """The stored runs' keys, each with whether the run is valid."""
        return {r[0]: bool(r[1]) for r in self.db.execute("SELECT run_key, valid FROM runs WHERE experiment_id = ?",
                                                          (experiment_id,))}

    def speed_checks(self, experiment_id: int) -> list[float]:
        """The speed checks of the experiment's stored runs, in the order they ran (speed.Reference)."""
        return [r[0] for r in self.db.execute("SELECT speed_ms FROM runs WHERE experiment_id = ? AND speed_ms IS NOT NULL "
                                              "ORDER BY started_at", (experiment_id,))]

    def idle_cores(self, experiment_id: int) -> dict[str, float]:
        """Each configuration's idle CPU (cores, runner.idle_cpu_cores) as its first stored run has it,
        by configuration key; a configuration none of whose runs has one is not there."""
        rows = self.db.execute(
            "SELECT config, json_extract(resources, '$.idle_cpu_cores') AS idle FROM runs "
            "WHERE experiment_id = ? AND idle IS NOT NULL ORDER BY started_at DESC", (experiment_id,))
        return {config: idle for config, idle in rows}  # the earliest run's figure is written last

    def save_run(self, experiment_id: int, values: dict[str, Any], replace: bool = False) -> None:
        """Commit one finished run now (a crash or Ctrl-C later loses nothing that is saved); with
        ``replace``, in place of any run stored under its key (arena merge: a shard run again)."""
        if values.get("flag_kinds") is None:  # an export or a rescue file from before flags had kinds
            values = {**values, "flag_kinds": kinds_before_14(values.get("flags", []))}
        row = {k: (json.dumps(v) if k in DOCUMENTS else v) for k, v in values.items()}
        missing = set(RUN_COLUMNS) - set(row)
        if missing:
            raise ValueError(f"run is missing {sorted(missing)}")
        row["summary"], row["figures"] = _summary_text(values["load"]), _figures_text(values["load"])
        stored = [c for c in (*RUN_COLUMNS, *COMPUTED) if c in self._columns]
        cols = ", ".join(stored)
        insert = (f"INSERT INTO runs (experiment_id, {cols}) VALUES (?, {', '.join('?' * len(stored))})",
                  (experiment_id, *(row[c] for c in stored)))
        if replace:
            self._write("DELETE FROM runs WHERE experiment_id = ? AND run_key = ?", (experiment_id, row["run_key"]), insert)
        else:
            self._write(*insert)

    def save_failure(self, experiment_id: int, values: dict[str, Any]) -> None:
        """Commit one run that could not be made (results/runs.py Failure), now."""
        cols = FAILURE_COLUMNS
        self._write(f"INSERT INTO failures (experiment_id, {', '.join(cols)}) VALUES (?, {', '.join('?' * len(cols))})",
                    (experiment_id, *(values[c] for c in cols)))

    def save_step(self, experiment_id: int, session: float, seq: int, stage: str, text: str) -> None:
        """Commit one step of a search (what it decided and why), now."""
        self._write("INSERT INTO steps (experiment_id, session, seq, stage, text, at) VALUES (?, ?, ?, ?, ?, ?)",
                    (experiment_id, session, seq, stage, text, time.time()))

    def steps(self, name: str) -> list[tuple[str, str]]:
        """The latest search's steps of the experiment, in order: (stage, text); [] where none ran."""
        rows = self.db.execute(
            "SELECT stage, text FROM steps s WHERE experiment_id = ? AND session = "
            "(SELECT MAX(session) FROM steps t WHERE t.experiment_id = s.experiment_id) ORDER BY seq",
            (self._id(name),))
        return [(r["stage"], r["text"]) for r in rows]

    def failures(self, name: str) -> list[Failure]:
        """The experiment's runs whose last attempt failed (none stored since), each with its last
        failure, in the order they failed."""
        rows = self.db.execute(
            "SELECT * FROM failures f WHERE experiment_id = ? AND run_key NOT IN "
            "(SELECT run_key FROM runs WHERE experiment_id = f.experiment_id) AND id = "
            "(SELECT MAX(id) FROM failures g WHERE g.experiment_id = f.experiment_id AND g.run_key = f.run_key) "
            "ORDER BY failed_at", (self._id(name),))
        return [Failure(**{k: r[k] for k in FAILURE_COLUMNS}) for r in rows]

    def bring_in(self, doc: dict[str, Any]) -> tuple[int, int]:
        """Rescued runs and failures (read_rescued) into this store, under their experiment (created,
        or checked to be the same definition). Returns (rows brought in, runs already stored)."""
        e = doc["experiment"]
        experiment_id = self.experiment_id(e["name"], e["file"], e["definition"])
        stored = self.done_keys(experiment_id)
        fresh = [r for r in doc.get("runs", []) if r["run_key"] not in stored]
        for r in fresh:
            self.save_run(experiment_id, r)
        for f in doc.get("failures", []):
            self.save_failure(experiment_id, f)
        return len(fresh) + len(doc.get("failures", [])), len(doc.get("runs", [])) - len(fresh)

    def rows(self, name: str) -> Iterator[dict[str, Any]]:
        """The experiment's runs as stored (a run's documents parsed), one at a time in the order they
        ran: what save_run takes, for copying them into another store (arena merge)."""
        for r in self.db.execute("SELECT * FROM runs WHERE experiment_id = ? ORDER BY started_at", (self._id(name),)):
            yield {k: (_loads(r[k]) if k in DOCUMENTS else r[k]) for k in RUN_COLUMNS}

    def failure_rows(self, name: str) -> list[dict[str, Any]]:
        """The experiment's failures as stored: what save_failure takes (arena merge)."""
        return [{k: r[k] for k in FAILURE_COLUMNS} for r in
                self.db.execute("SELECT * FROM failures WHERE experiment_id = ? ORDER BY failed_at", (self._id(name),))]

    def machines(self, name: str) -> Counter:
        """How many of the experiment's runs ran on each (CPU model, host), read from the stored
        environments by SQLite (arena merge keeps other models' runs apart)."""
        return Counter((r[0], r[1]) for r in self.db.execute(
            "SELECT json_extract(environment, '$.cpu_model'), json_extract(environment, '$.host') FROM runs "
            "WHERE experiment_id = ?", (self._id(name),)))

    @contextlib.contextmanager
    def one_transaction(self) -> Iterator[None]:
        """The writes inside as one transaction, committed at the end (arena merge, into a copy that
        is renamed whole: a commit a run took 38 s for 10,000); rolled back where one fails."""
        self._batched = True
        try:
            yield
            self.db.commit()
        except sqlite3.Error as e:
            self.db.rollback()
            raise NotSaved(f"{self.named}: cannot write it ({e})") from None
        except BaseException:
            self.db.rollback()
            raise
        finally:
            self._batched = False

    def runs(self, name: str, load: str = "summary") -> list[Run]:
        """The experiment's runs in the order they ran, each decoded once into a typed Run with the
        figures its cell reads (results/load_result.py LoadFigures) and its load result, decoded when it
        is first read: as the analysis reads it (``load`` "summary": results/load_result.py summary, no
        tool's document, warm-up or per-interval histograms), as the tool gave it ("whole": a run's
        detail, the exports), or none ("none": a table of the stored columns). A document many runs
        share (the environment, the launch) is decoded once."""
        read = {"summary": "summary AS load", "whole": "load", "none": "'null' AS load"}[load]
        columns = ", ".join(["id", *(c for c in RUN_COLUMNS if c != "load"), "figures", read])
        rows = self.db.execute(f"SELECT {columns} FROM runs WHERE experiment_id = ? ORDER BY started_at",
                               (self._id(name),))
        seen: dict[str, Any] = {}

        def parsed(text: str) -> Any:
            if len(text) > 512:  # a run's own (its resources): not worth keeping
                return _loads(text)
            if text not in seen:
                seen[text] = _loads(text)
            return seen[text]

        def deferred(text: str) -> Any:
            return None if text == "null" else functools.partial(_loads, text)

        environments: dict[str, Environment] = {}  # the machine's description, one object for the runs that share it

        def environment(text: str) -> Environment:
            if text not in environments:
                environments[text] = Environment.from_json(_loads(text) or {})
            return environments[text]

        with _uncollected():
            return [decode(r, {**{k: parsed(r[k]) for k in DOCUMENTS if k not in ("load", "environment")},
                               "environment": environment(r["environment"]), "load": deferred(r["load"]),
                               "figures": _loads(r["figures"])}) for r in rows]


def _loads(text: str) -> Any:
    """A stored run document parsed: by orjson, 2.8x the json module's speed on the 46 MB of a
    10,000-run store's summaries (0.66 s against 1.87 s); by json where the text holds NaN or
    Infinity, which json writes and orjson does not read."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """Python's cyclic collector paused while many runs are decoded, and what exists then frozen
    (gc.freeze: left out of every later collection; reference counting frees it as before). Decoded
    runs hold no reference cycles, yet each pass of the collector scans every object alive: at 10,000
    runs (1.5 million objects) its passes took a third of `arena show` (6.2 s with them, 4.4 s
    frozen; pausing alone saved nothing, the passes after it scan them all the same)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


# ---------------------------------------------------------------------- results kept elsewhere

RESCUE_FORMAT = "arena-rescued-runs/1"


def rescue(store_path: str, experiment: dict[str, Any], runs: list[dict[str, Any]] = (),
           failures: list[dict[str, Any]] = ()) -> str:
    """Keep rows that could not be written to the store at ``store_path`` in a JSON file (beside the
    store, else in the temporary directory) that ``arena import`` brings in. Returns its path; an
    error only where neither place can be written."""
    doc = json.dumps({"format": RESCUE_FORMAT, "experiment": experiment, "runs": list(runs),
                      "failures": list(failures)}, default=str)
    name = f"{Path(store_path).name}.rescued-{os.getpid()}-{int(time.time() * 1000)}.json"
    problems = []
    for where in (Path(store_path).resolve().parent, Path(tempfile.gettempdir())):
        try:
            write_file(where / name, doc, "rescue")
            return str(where / name)
        except ArenaError as e:
            problems.append(f"{where}: {str(e).rpartition('(')[2].rstrip(')')}")
    raise NotSaved(f"--store {store_path}: the result could be kept nowhere ({'; '.join(problems)})")


def read_rescued(path: str) -> dict[str, Any]:
    """A file ``rescue`` wrote, checked against the runs' schema (schemas/run.schema.json: what the
    store writes), so that a hand-edited file never brings in a run no reader can decode: the first
    problem refused in one line naming the run and the field."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ArenaError(f"{path}: cannot read it as rescued runs ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(doc, dict) or doc.get("format") != RESCUE_FORMAT:
        raise ArenaError(f"{path}: not a file of rescued runs (its format is not {RESCUE_FORMAT})")
    problem = schema_problem(doc, "rescue")
    if problem is not None:
        raise ArenaError(f"{path}: {problem}; nothing was brought in")
    return doc

