"""What the subject's /db and /api need, per process: a pool of database connections (psycopg 3:
``psycopg_pool.ConnectionPool`` for threads and greenlets, ``AsyncConnectionPool`` for an event
loop) and a kept-alive connection to the downstream service (``http.client`` per thread, an
``httpx.AsyncClient`` per event loop). Created on first use in each process, so a forking server's
workers never share a socket.

Configuration from the environment Arena gives the server: libpq's PGHOST/PGPORT/PGDATABASE/PGUSER
(or ARENA_DATABASE_URL), ARENA_POOL (connections per process; default 5), ARENA_POOL_TIMEOUT
(seconds to wait for one; default 5), ARENA_API_URL. Under gevent, psycopg waits through
``select``, which gevent patches, so a query yields to other greenlets instead of blocking the hub.
"""

from __future__ import annotations

import http.client
import os
import threading
import time
from urllib.parse import urlsplit

from arena.subjects.python.ops import BadGateway, Call, Query, Unavailable

POOL_SIZE = int(os.environ.get("ARENA_POOL", "5"))
POOL_TIMEOUT_S = float(os.environ.get("ARENA_POOL_TIMEOUT", "5"))
_lock = threading.Lock()
_pools: dict[object, object] = {}  # (pid, loop or None) -> pool
_local = threading.local()


def _conninfo() -> str:
    return "" if os.environ.get("PGHOST") else os.environ.get("ARENA_DATABASE_URL", "")


def _refused(e: Exception) -> Unavailable:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return Unavailable(f"db: {first}")


def _timed_out() -> Unavailable:
    return Unavailable(f"db: no pooled connection within {POOL_TIMEOUT_S:g} s (pool of {POOL_SIZE} per process)")


def _sync_pool():
    from psycopg_pool import ConnectionPool

    key = (os.getpid(), None)
    pool = _pools.get(key)
    if pool is None:
        with _lock:
            pool = _pools.get(key)
            if pool is None:
                pool = ConnectionPool(_conninfo(), min_size=1, max_size=POOL_SIZE, timeout=POOL_TIMEOUT_S, open=True,
                                      name=f"arena-{os.getpid()}")
                _pools[key] = pool
    return pool


def _run_query(conn, op: Query) -> list:
    cur = conn.execute(op.sql, op.params)
    return cur.fetchall() if op.fetch else []


def sync_io(op: Query | Call):
    """Perform ``op`` in this thread (or greenlet)."""
    if isinstance(op, Call):
        return _sync_call(op)
    import psycopg
    from psycopg_pool import PoolTimeout

    t0 = time.perf_counter()
    try:
        with _sync_pool().connection() as conn:  # commits on the way out
            t1 = time.perf_counter()
            rows = _run_query(conn, op)
    except PoolTimeout:
        raise _timed_out() from None
    except psycopg.OperationalError as e:
        raise _refused(e) from None
    return rows, t1 - t0, time.perf_counter() - t1


def _sync_call(op: Call):
    url = urlsplit(os.environ["ARENA_API_URL"])
    for attempt in (1, 2):  # a kept-alive connection the service closed is opened again, once
        conn = getattr(_local, "api", None)
        if conn is None:
            conn = _local.api = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        t0 = time.perf_counter()
        try:
            conn.request("GET", op.target)
            resp = conn.getresponse()
            body = resp.read()
            return resp.status, len(body), time.perf_counter() - t0
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            _local.api = None
            if attempt == 2:
                raise BadGateway(f"api: {type(e).__name__}: {e}") from None


async def async_io(op: Query | Call):
    """Perform ``op`` in the running event loop."""
    import asyncio

    loop = asyncio.get_running_loop()
    if isinstance(op, Call):
        return await _async_call(op, loop)
    import psycopg
    from psycopg_pool import AsyncConnectionPool, PoolTimeout

    key = (os.getpid(), loop)
    pool = _pools.get(key)
    if pool is None:
        pool = AsyncConnectionPool(_conninfo(), min_size=1, max_size=POOL_SIZE, timeout=POOL_TIMEOUT_S, open=False,
                                   name=f"arena-{os.getpid()}")
        _pools[key] = pool
        await pool.open()
    t0 = time.perf_counter()
    try:
        async with pool.connection() as conn:
            t1 = time.perf_counter()
            cur = await conn.execute(op.sql, op.params)
            rows = await cur.fetchall() if op.fetch else []
    except PoolTimeout:
        raise _timed_out() from None
    except psycopg.OperationalError as e:
        raise _refused(e) from None
    return rows, t1 - t0, time.perf_counter() - t1


async def _async_call(op: Call, loop):
    import httpx

    key = ("api", os.getpid(), loop)
    client = _pools.get(key)
    if client is None:
        client = _pools[key] = httpx.AsyncClient(base_url=os.environ["ARENA_API_URL"], timeout=120,
                                                 limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
    t0 = time.perf_counter()
    try:
        resp = await client.get(op.target)
    except httpx.HTTPError as e:
        raise BadGateway(f"api: {type(e).__name__}: {e}") from None
    return resp.status_code, len(resp.content), time.perf_counter() - t0
