"""A managed PostgreSQL: a fresh cluster made with initdb in a temp dir, run as an unprivileged
system user (PostgreSQL refuses root), confined like a server, listening on a unix socket in its
temp dir and on a free loopback port, with the experiment's settings, and seeded with a
deterministic table before any server starts.

The table, ``items``: ``rows`` rows, ``id`` 1..rows (primary key), ``category`` = id mod 100 (an
index), ``name`` = 'item-<id>', ``price`` = (id * 7919 mod 10000) / 100, ``created_at`` = 2026-01-01 +
id minutes; ANALYZEd. The same ``rows`` give the same table, byte for byte, every time.
"""

from __future__ import annotations

import os
import re
import pwd
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.errors import ArenaError, forking, stop_if_asked
from arena.http_client import free_port
from arena.servers import launch
from arena.servers.cgroup import ProcessSet, create
from arena.services.fields import Field, read

USER = os.environ.get("ARENA_PG_USER", "postgres")  # Debian's postgresql package creates it
DATABASE, ROLE = "arena", "arena"
READY_TIMEOUT_S = 30.0
GRACE_S = 10.0  # SIGINT is PostgreSQL's fast shutdown: it ends sessions and checkpoints
# the FATAL line of each connection PostgreSQL refuses for want of a slot (max_connections)
REFUSED = re.compile(r"FATAL:\s+((?:sorry, too many clients already|remaining connection slots are reserved)[^\n]*)")


@dataclass(frozen=True)
class PostgresSettings:
    max_connections: int = 100
    shared_buffers: str = "128MB"
    synchronous_commit: bool = True
    fsync: bool = True
    rows: int = 10_000


FIELDS = (
    Field("max_connections", int, lambda v: 3 <= v <= 10_000, "a whole number from 3 to 10000"),
    Field("shared_buffers", str, lambda v: v[:-2].isdigit() and v[-2:] in ("kB", "MB", "GB") and int(v[:-2]) > 0,
          "a size such as \"128MB\" (kB, MB or GB)"),
    Field("synchronous_commit", bool, lambda v: True, "true or false"),
    Field("fsync", bool, lambda v: True, "true or false"),
    Field("rows", int, lambda v: 1 <= v <= 100_000_000, "a whole number from 1 to 100000000"),
)


def settings(given: dict[str, Any], where: str = "services.postgres.") -> PostgresSettings:
    return PostgresSettings(**read(given, FIELDS, where))


def bin_dir() -> Path:
    """The newest installed PostgreSQL's binaries (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise ArenaError("service postgres: PostgreSQL is not installed (make install: Debian's postgresql)")
    return found[-1].parent


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        raise ArenaError(f"service postgres: no user '{USER}' to run PostgreSQL as (it refuses root; make install "
                         "creates one, or set ARENA_PG_USER)") from None


def reaches(user: pwd.struct_passwd, path: Path) -> bool:
    """Whether ``user`` may go through ``path`` and every directory above it (search permission, as
    its owner, a member of its group, or another)."""
    groups = set(os.getgrouplist(user.pw_name, user.pw_gid))
    for d in [path, *path.parents]:
        st = d.stat()
        bit = (stat.S_IXUSR if st.st_uid == user.pw_uid else stat.S_IXGRP if st.st_gid in groups else stat.S_IXOTH)
        if not st.st_mode & bit:
            return False
    return True


def _temp_dir_for(user: pwd.struct_passwd) -> None:
    """The cluster goes in the temporary directory, where PostgreSQL's user must reach it."""
    tmp = Path(tempfile.gettempdir())
    if not reaches(user, tmp):
        raise ArenaError(f"service postgres: the temporary directory {tmp} (TMPDIR) is out of reach of user "
                         f"'{USER}', who runs PostgreSQL: set TMPDIR to a directory every user can enter, such as /tmp")


@dataclass(eq=False)
class RunningPostgres(launch.Confined):
    settings: PostgresSettings
    proc: subprocess.Popen
    procset: ProcessSet
    workdir: Path
    port: int
    log_path: Path
    version: str
    startup_s: float = 0.0
    stopped: bool = False
    killed: list[int] = field(default_factory=list)

    kind = "postgres"

    @property
    def socket_dir(self) -> str:
        return str(self.workdir)

    @property
    def dsn(self) -> str:
        """libpq's key=value form, over the unix socket."""
        return f"host={self.socket_dir} port={self.port} dbname={DATABASE} user={ROLE}"

    @property
    def env(self) -> dict[str, str]:
        """What a server gets to reach it: a URL (TCP) and libpq's own variables (the socket)."""
        return {"ARENA_DATABASE_URL": f"postgresql://{ROLE}@127.0.0.1:{self.port}/{DATABASE}",
                "PGHOST": self.socket_dir, "PGPORT": str(self.port), "PGDATABASE": DATABASE, "PGUSER": ROLE,
                "ARENA_DB_ROWS": str(self.settings.rows)}

    def describe(self) -> str:
        """What ran, the same every time it runs with these settings (stored with each run)."""
        s = self.settings
        return (f"PostgreSQL {self.version} (max_connections {s.max_connections}, shared_buffers {s.shared_buffers}, "
                f"fsync {'on' if s.fsync else 'off'}, synchronous_commit {'on' if s.synchronous_commit else 'off'}; "
                f"items: {s.rows} rows)")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port} and {self.socket_dir}"

    def log_tail(self, lines: int = 15) -> str:
        return launch.log_tail(self.log_path, lines)

    def stop_how(self) -> tuple[int, float]:
        return signal.SIGINT, GRACE_S  # PostgreSQL's fast shutdown

    def log_mark(self) -> int:
        """Where its log ends now: refusals() counts from here."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def refusals(self, mark: int) -> tuple[int, str | None]:
        """Connections the database refused since ``mark`` (its own log: every refusal is a FATAL
        line there), and the first one's message."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(mark)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return 0, None
        found = REFUSED.findall(text)
        return len(found), (found[0].strip() if found else None)


def start_postgres(s: PostgresSettings, cpus: list[int] | None = None) -> RunningPostgres:
    """initdb, start, wait until it answers, seed: a ready cluster, or an error with its log's tail
    (and nothing left)."""
    import psycopg

    binaries, user = bin_dir(), _user()
    _temp_dir_for(user)
    launch.reap_before_start()
    procset = create("postgres", cpus)
    workdir = Path(tempfile.mkdtemp(prefix=f"{procset.name}-"))  # named after its set: reaped with it
    log_path = workdir / "postgres.log"
    started = time.monotonic()
    try:
        os.chown(workdir, user.pw_uid, user.pw_gid)
        join = procset.preexec()

        def confined_as_user() -> None:  # join the group while still root, then become the user
            join()
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

        as_user = dict(cwd=workdir, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(workdir)},
                       preexec_fn=confined_as_user)
        with open(log_path, "ab") as log:
            os.chown(log_path, user.pw_uid, user.pw_gid)
            with forking():  # a signal meanwhile is raised once initdb is done (its group is reaped)
                made = subprocess.run([str(binaries / "initdb"), "-D", str(workdir / "data"), "-U", ROLE,
                                       "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=120,
                                      **as_user)
            stop_if_asked()
            if made.returncode != 0:
                raise ArenaError(f"service postgres: initdb failed (exit {made.returncode}); last lines of its log:\n"
                                 f"{launch.log_tail(log_path)}")
            port = free_port("127.0.0.1")
            argv = [str(binaries / "postgres"), "-D", str(workdir / "data"), "-k", str(workdir), "-p", str(port),
                    "-c", "listen_addresses=127.0.0.1", "-c", f"max_connections={s.max_connections}",
                    "-c", f"shared_buffers={s.shared_buffers}", "-c", f"fsync={'on' if s.fsync else 'off'}",
                    "-c", f"synchronous_commit={'on' if s.synchronous_commit else 'off'}"]
            proc = launch.spawn(argv, confined_as_user, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=workdir, env=as_user["env"])
    except BaseException:
        launch.abandon(procset, workdir)
        raise
    running = RunningPostgres(s, proc, procset, workdir, port, log_path, binaries.parts[-2])
    launch._live.add(running)
    def ready() -> None:
        _wait_ready(running, psycopg)
        seed(running.dsn, s.rows)

    launch.ready_or_stopped(running, ready, keep_log=False)  # its temp dir holds the whole cluster
    running.startup_s = time.monotonic() - started
    return running


def _wait_ready(running: RunningPostgres, psycopg) -> None:
    def attempt() -> None:
        with psycopg.connect(running.dsn.replace(f"dbname={DATABASE}", "dbname=postgres"), connect_timeout=2,
                             autocommit=True) as c:
            c.execute(f"CREATE DATABASE {DATABASE}")

    launch.poll_ready("service postgres: postgres", READY_TIMEOUT_S, running.proc.poll, attempt, "connect",
                      transient=(psycopg.OperationalError,))


def seed(dsn: str, rows: int) -> None:
    """The deterministic ``items`` table (module docstring), in one transaction."""
    import psycopg

    with psycopg.connect(dsn) as c:
        c.execute("CREATE TABLE items (id bigint PRIMARY KEY, category int NOT NULL, name text NOT NULL, "
                  "price numeric(10, 2) NOT NULL, created_at timestamptz NOT NULL)")
        c.execute("INSERT INTO items SELECT i, i %% 100, 'item-' || i, (i * 7919 %% 10000) / 100.0, "
                  "timestamptz '2026-01-01 00:00:00+00' + i * interval '1 minute' FROM generate_series(1, %s) AS i",
                  (rows,))
        c.execute("CREATE INDEX items_category ON items (category)")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("ANALYZE items")
