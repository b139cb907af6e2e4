"""The subject workload shared by the WSGI, ASGI and Flask apps. Contract: ``../spec.md``.

The handler is a generator: it does its CPU work itself and *yields* each wait (a :class:`Wait`)
to its driver, which performs it the way its interface must: ``time.sleep`` in WSGI,
``await asyncio.sleep`` in ASGI. So one piece of code serves every Python front end, and the only
thing a front end decides is how to wait. The generator returns the :class:`Response`.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import platform
import random
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Generator

from arena.subjects.wrap.arena_wrap import LoopLag, gc_clock, throttle_clock, waits
from arena.subjects.python.ops import (BadGateway, BadRequest, Call, InsufficientStorage, NotFound, Query, Unavailable,
                                      Wait)

# Big integers from /pi (10000 digits) exceed CPython's default 4300-digit str() limit.
sys.set_int_max_str_digits(0)

ENDPOINTS = ("work", "fib", "pi", "sort", "json", "sleep", "db", "api", "leak", "server", "health", "stream")
MIX_ENDPOINTS = ENDPOINTS[:-1]  # every endpoint but /stream (one answer each) can be drawn by /mix


@dataclass(frozen=True)
class Param:
    """One query parameter: its type ("number", "integer" or "word"), bounds or words, default."""

    kind: str
    default: object
    lo: float = 0
    hi: float = 0
    words: tuple[str, ...] = ()

    def allowed(self) -> str:
        if self.kind == "word":
            return " or ".join(repr(w).replace('"', "'") for w in self.words)
        return f"a{'n' if self.kind == 'integer' else ''} {self.kind} from {_fmt(self.lo)} to {_fmt(self.hi)}"

    def parse(self, name: str, raw: str) -> object:
        problem = f"{name}: must be {self.allowed()}, got '{raw}'"
        if self.kind == "word":
            if raw not in self.words:
                raise BadRequest(problem)
            return raw
        pattern = _INTEGER if self.kind == "integer" else _NUMBER
        if not pattern.fullmatch(raw):
            raise BadRequest(problem)
        value = int(raw) if self.kind == "integer" else float(raw)
        if not (self.lo <= value <= self.hi) or (isinstance(value, float) and math.isnan(value)):
            raise BadRequest(problem)
        return value


_INTEGER = re.compile(r"-?[0-9]+")
_NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
DISTRIBUTIONS = ("fixed", "exp", "lognormal", "uniform")
LEAK_BOUND_KB = 1024 * 1024  # what /leak keeps at most in one process: 1 GiB

PARAMS: dict[str, dict[str, Param]] = {
    "work": {
        "cpu_ms": Param("number", 0, 0, 10_000),
        "io_ms": Param("number", 0, 0, 60_000),
        "io_min_ms": Param("number", 0, 0, 60_000),
        "bytes": Param("integer", 0, 0, 10 * 1024 * 1024),
        "io": Param("word", "sleep", words=("sleep", "block")),
        "cpu_dist": Param("word", "fixed", words=DISTRIBUTIONS),
        "io_dist": Param("word", "fixed", words=DISTRIBUTIONS),
        "sigma": Param("number", 1.0, 0, 4),
    },
    "fib": {"n": Param("integer", 1000, 0, 100_000)},
    "pi": {"digits": Param("integer", 100, 1, 10_000)},
    "sort": {"n": Param("integer", 1000, 0, 1_000_000)},
    "json": {"min": Param("integer", 10, 0, 100_000), "max": Param("integer", 100, 0, 100_000)},
    "sleep": {"ms": Param("number", 0, 0, 60_000)},
    "db": {"q": Param("word", "point", words=("point", "range", "write", "sleep")),
           "rows": Param("integer", 10, 1, 10_000), "ms": Param("number", 10, 0, 60_000)},
    "api": {"ms": Param("number", 10, 0, 60_000), "bytes": Param("integer", 100, 0, 10 * 1024 * 1024)},
    "leak": {"kb": Param("integer", 0, 0, LEAK_BOUND_KB), "reset": Param("word", "0", words=("0", "1"))},
    "server": {},
    "health": {},
    "stream": {"events": Param("integer", 10, 1, 100_000), "interval_ms": Param("number", 50, 0, 60_000),
               "first_ms": Param("number", 0, 0, 60_000), "cpu_ms": Param("number", 0, 0, 10_000),
               "bytes": Param("integer", 16, 0, 65_536), "buffering": Param("word", "yes", words=("yes", "no"))},
}
WEIGHT = Param("number", 0, 0, 1_000_000)
SEED = Param("integer", None, 0, 2**63 - 1)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain"
    headers: list[tuple[str, str]] = field(default_factory=list)
    blocked_s: float = 0.0  # an event loop's driver: the request's own blocking waits (LoopLag)
    stream: Generator[Wait | bytes, None, None] | None = None  # /stream: its parts and the waits between


@dataclass
class _Phases:
    """Timings of one request (seconds); rendered into Server-Timing."""

    cpu: float = 0.0
    cpuwall: float = 0.0
    io: float = 0.0
    pool: float | None = None  # waiting for a pooled database connection
    db: float | None = None  # the query
    api: float | None = None  # the downstream call


# ---------------------------------------------------------------- parameters


def parse_query(query: str) -> dict[str, str]:
    """``a=1&b=2`` -> dict; the last of a repeated name wins (spec: Query parameters)."""
    from urllib.parse import parse_qsl

    return dict(parse_qsl(query, keep_blank_values=True))


def endpoint_args(endpoint: str, query: dict[str, str], prefixed: bool = False) -> dict[str, object]:
    """Validate ``query`` for ``endpoint``; return every parameter with its default filled in.

    With ``prefixed`` (inside /mix) other endpoints' parameters are ignored and
    ``<endpoint>.<name>`` wins over ``<name>``.
    """
    spec = PARAMS[endpoint]
    raw: dict[str, str] = {}
    for name, value in query.items():
        if name in spec:
            raw.setdefault(name, value)
        elif not prefixed:
            raise BadRequest(f"{name}: unknown parameter for /{endpoint} (allowed: {_names(spec)})")
    if prefixed:
        for name in spec:
            key = f"{endpoint}.{name}"
            if key in query:
                raw[name] = query[key]
    args = {name: p.default for name, p in spec.items()}
    for name, value in raw.items():
        label = f"{endpoint}.{name}" if prefixed and f"{endpoint}.{name}" in query else name
        args[name] = spec[name].parse(label, value)
    if endpoint == "json" and args["min"] > args["max"]:
        raise BadRequest(f"min: must be <= max ({args['max']}), got '{args['min']}'")
    return args


def _names(spec: dict[str, Param]) -> str:
    return ", ".join(spec) if spec else "none"


def mix_args(query: dict[str, str]) -> tuple[dict[str, float], int | None]:
    """Validate /mix's own parameters and every other name; return (weights, seed)."""
    weights: dict[str, float] = {}
    seed = None
    for name, value in query.items():
        if name.startswith("w_"):
            if name[2:] not in MIX_ENDPOINTS:
                raise BadRequest(f"{name}: unknown endpoint weight (allowed: w_{', w_'.join(MIX_ENDPOINTS)})")
            weights[name[2:]] = WEIGHT.parse(name, value)
        elif name == "seed":
            seed = SEED.parse(name, value)
        else:
            endpoint, dot, param = name.partition(".")
            known = (endpoint in MIX_ENDPOINTS and param in PARAMS[endpoint] if dot
                     else any(name in PARAMS[e] for e in MIX_ENDPOINTS))
            if not known:
                raise BadRequest(f"{name}: unknown parameter for /mix (allowed: w_<endpoint>, seed, "
                                 "and the endpoints' parameters, plain or as <endpoint>.<name>)")
    if not any(w > 0 for w in weights.values()):
        raise BadRequest("w_*: at least one endpoint weight must be above 0, got none")
    return weights, seed


# ---------------------------------------------------------------- random streams

_unseeded = random.Random()
_seeded: dict[int, random.Random] = {}
_seeded_lock = threading.Lock()


def rng_for(seed: int | None) -> random.Random:
    """One generator per process per seed, so a seeded mix is a repeatable stream per process."""
    if seed is None:
        return _unseeded
    with _seeded_lock:
        return _seeded.setdefault(seed, random.Random(seed))


def sample(mean: float, dist: str, sigma: float, hi: float, rng: random.Random) -> float:
    """Draw from ``dist`` with the given mean, clipped to ``hi`` (spec: Distributions)."""
    if mean <= 0 or dist == "fixed":
        value = mean
    elif dist == "exp":
        value = rng.expovariate(1.0 / mean)
    elif dist == "uniform":
        value = rng.uniform(0.0, 2.0 * mean)
    else:  # lognormal with E[X] = mean: mu = ln(mean) - sigma^2 / 2
        value = rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)
    return min(value, hi)


# ---------------------------------------------------------------- the work


def burn_cpu(seconds: float) -> None:
    """Busy-loop until this thread's CPU clock has advanced by ``seconds``."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(100):  # ~5 µs between clock reads keeps the overshoot small
            x += i * i


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def _arctan_inv(x: int, unity: int) -> int:
    """arctan(1/x) * unity by its Taylor series, in integers."""
    total = term = unity // x
    x2, k, sign = x * x, 3, -1
    while term:
        term //= x2
        total += sign * (term // k)
        sign, k = -sign, k + 2
    return total


def pi_digits(digits: int) -> str:
    """pi truncated to ``digits`` decimals; Machin: pi = 16 atan(1/5) - 4 atan(1/239)."""
    guard = 10
    unity = 10 ** (digits + guard)
    pi = 4 * (4 * _arctan_inv(5, unity) - _arctan_inv(239, unity))
    text = str(pi // 10**guard)
    return f"{text[0]}.{text[1:]}"


def json_doc(size: int, rng: random.Random) -> dict:
    return {
        f"item{i}": {"id": i, "name": f"item-{i}", "score": rng.random(), "tags": ["a", "b", "c"]}
        for i in range(size)
    }


def _json_bytes(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


_kept: list[bytes] = []  # what /leak keeps, for the process's life or until /leak?reset=1
_kept_kb = 0
_kept_lock = threading.Lock()


def leak(kb: int, reset: bool) -> dict:
    """/leak: keep ``kb`` KiB more in this process, written so that they are resident, or let go of
    everything kept with ``reset`` (spec: /leak)."""
    global _kept_kb
    with _kept_lock:
        if reset:
            _kept.clear()
            _kept_kb = 0
        elif _kept_kb + kb > LEAK_BOUND_KB:
            raise InsufficientStorage(f"leak: keeping {kb} KiB more would pass the bound of {LEAK_BOUND_KB} KiB kept "
                                      f"per process ({_kept_kb} KiB kept; /leak?reset=1 lets go of them)")
        elif kb:
            _kept.append(b"\xa5" * (kb * 1024))
            _kept_kb += kb
        return {"kept_kb": _kept_kb, "pid": os.getpid()}


INTERPRETER = f"{platform.python_implementation()} {platform.python_version()}"


def server_info(app_kind: str) -> dict:
    return {
        "server": os.environ.get("ARENA_SERVER", "unknown"),
        "pid": os.getpid(),
        "thread": threading.get_native_id(),
        "app": app_kind,
        "language": "python",
        "interpreter": INTERPRETER,
    }


# ---------------------------------------------------------------- the handler


def _compute(endpoint: str, args: dict, rng: random.Random, app_kind: str,
             phases: _Phases) -> tuple[bytes, str, float, bool]:
    """Run the CPU phase; return (body, content type, I/O seconds still to wait, blocking)."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    io_s, blocking, content_type = 0.0, False, "application/json"
    if endpoint == "work":
        cpu_ms = sample(args["cpu_ms"], args["cpu_dist"], args["sigma"], 10_000, rng)
        io_s = min(args["io_min_ms"] + sample(args["io_ms"], args["io_dist"], args["sigma"], 60_000, rng), 60_000) / 1000
        blocking = args["io"] == "block"
        burn_cpu(cpu_ms / 1000)
        body, content_type = b"x" * args["bytes"], "text/plain"
    elif endpoint == "fib":
        f = fib(args["n"])
        body = _json_bytes({"n": args["n"], "bits": f.bit_length(), "mod1e9": f % 10**9})
    elif endpoint == "pi":
        body, content_type = pi_digits(args["digits"]).encode(), "text/plain"
    elif endpoint == "sort":
        values = sorted(rng.randrange(2**31) for _ in range(args["n"]))
        body = _json_bytes({"n": args["n"], "min": values[0] if values else None,
                            "max": values[-1] if values else None})
    elif endpoint == "json":
        body = _json_bytes(json_doc(rng.randint(args["min"], args["max"]), rng))
    elif endpoint == "sleep":
        io_s, body, content_type = args["ms"] / 1000, b"", "text/plain"
    elif endpoint == "leak":
        body = _json_bytes(leak(args["kb"], args["reset"] == "1"))
    elif endpoint == "server":
        body = _json_bytes(server_info(app_kind))
    else:  # health
        body, content_type = b"ok", "text/plain"
    phases.cpu = time.thread_time() - cpu0
    phases.cpuwall = time.perf_counter() - wall0
    return body, content_type, io_s, blocking


def parse_request_start(value: str) -> float:
    """``X-Request-Start`` -> seconds since the epoch (spec: X-Request-Start)."""
    text = value.strip()
    if text.startswith("t="):
        text = text[2:]
    if re.fullmatch(r"[0-9]+\.[0-9]+", text):
        return float(text)
    if re.fullmatch(r"[0-9]+", text):
        n = int(text)
        return n / 1e6 if n >= 10**15 else n / 1e3 if n >= 10**12 else float(n)
    raise BadRequest(f"X-Request-Start: must be t=<microseconds since the epoch>, got '{value}'")


def _queue_timing(queue_s: float | None) -> list[str]:
    return [] if queue_s is None else [f"queue;dur={max(queue_s, 0.0) * 1000:.3f}"]


def _phase_timing(phases: _Phases, app_s: float) -> list[str]:
    return [f"app;dur={app_s * 1000:.3f}", f"cpu;dur={phases.cpu * 1000:.3f}",
            f"cpuwall;dur={phases.cpuwall * 1000:.3f}", f"io;dur={phases.io * 1000:.3f}"]


def server_timing(phases: _Phases, app_s: float, queue_s: float | None, gc_s: float = 0.0,
                  throttled_s: float = 0.0) -> str:
    parts = _queue_timing(queue_s) + _phase_timing(phases, app_s)
    parts += [f"{name};dur={v * 1000:.3f}" for name, v in (("pool", phases.pool), ("db", phases.db), ("api", phases.api))
              if v is not None]
    return ", ".join(parts + waits(gc_s, 0.0, min(throttled_s, app_s)))


# ---------------------------------------------------------------- database and downstream calls

DB_ROWS_DEFAULT = 10_000
COLUMNS = ("id", "category", "name", "price")


def db_rows() -> int:
    """Rows of the seeded ``items`` table (the service tells the servers: ARENA_DB_ROWS)."""
    return int(os.environ.get("ARENA_DB_ROWS", DB_ROWS_DEFAULT))


def have_database() -> bool:
    return bool(os.environ.get("PGHOST") or os.environ.get("ARENA_DATABASE_URL"))


def db_query(args: dict, rng: random.Random) -> Query:
    """The query of /db?q=...: a primary-key lookup, a range scan of ``rows`` rows, an update in a
    transaction, or a server-side wait (spec: /db)."""
    if not have_database():
        raise Unavailable("db: no database service (start one: [[services]] kind = \"postgres\", "
                          "or arena serve --service postgres)")
    n = db_rows()
    key = rng.randint(1, n)
    if args["q"] == "point":
        return Query("SELECT id, category, name, price::float FROM items WHERE id = %s", (key,), True)
    if args["q"] == "range":
        first = rng.randint(1, max(1, n - args["rows"] + 1))
        return Query("SELECT id, category, name, price::float FROM items WHERE id BETWEEN %s AND %s ORDER BY id",
                     (first, first + args["rows"] - 1), True)
    if args["q"] == "write":
        return Query("UPDATE items SET price = price + 0.01 WHERE id = %s RETURNING id, category, name, price::float",
                     (key,), True)
    return Query("SELECT pg_sleep(%s)", (args["ms"] / 1000,), False)


def api_call(args: dict) -> Call:
    """The downstream request of /api: the service's /work with this latency and size (spec: /api)."""
    if not os.environ.get("ARENA_API_URL"):
        raise Unavailable("api: no downstream service (start one: [[services]] kind = \"http\", "
                          "or arena serve --service http)")
    dist = os.environ.get("ARENA_API_DIST", "fixed")
    sigma = os.environ.get("ARENA_API_SIGMA", "1")
    return Call(f"/work?io_ms={args['ms']:g}&io_dist={dist}&sigma={sigma}&bytes={args['bytes']}")


def stream_parts(args: dict, start: float) -> Generator[Wait | bytes, None, None]:
    """/stream's parts, each yielded as it is made, and the waits between them (spec: /stream): the
    opening comment, ``events`` events, the closing comment with the stream's own timing."""
    phases, payload = _Phases(), b"x" * args["bytes"]
    yield b": stream\n\n"
    for i in range(1, args["events"] + 1):
        wait_s = (args["first_ms"] if i == 1 else args["interval_ms"]) / 1000
        if wait_s > 0:
            t0 = time.perf_counter()
            yield Wait(wait_s, False)
            phases.io += time.perf_counter() - t0
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        burn_cpu(args["cpu_ms"] / 1000)
        phases.cpu += time.thread_time() - cpu0
        phases.cpuwall += time.perf_counter() - wall0
        yield b"id: %d\ndata: %s\n\n" % (i, payload)
    yield f": server-timing {', '.join(_phase_timing(phases, time.perf_counter() - start))}\n\n".encode()


def _stream_response(args: dict, start: float, queue_s: float | None) -> Response:
    """/stream's head (what is known when it leaves: the queue) and its parts."""
    timing = _queue_timing(queue_s)
    headers = [("Cache-Control", "no-cache")] + ([("X-Accel-Buffering", "no")] if args["buffering"] == "no" else [])
    headers += [("Server-Timing", ", ".join(timing))] if timing else []
    headers += [("X-Arena-Pid", str(os.getpid())), ("X-Arena-Thread", str(threading.get_native_id())),
                ("X-Arena-Endpoint", "stream")]
    return Response(200, b"", "text/event-stream", headers, stream=stream_parts(args, start))


def handle(path: str, query: str, request_start: str | None,
           app_kind: str) -> Generator[Wait, None, Response]:
    """Serve one request. Yields the waits to perform; returns the Response."""
    start_wall, start, gc0, held0 = time.time(), time.perf_counter(), gc_clock.total_s, throttle_clock.seconds()
    phases = _Phases()
    endpoint = path.strip("/") or "/"
    queue_s = None
    try:
        if request_start is not None:
            queue_s = start_wall - parse_request_start(request_start)
        if endpoint not in PARAMS and endpoint != "mix":
            raise NotFound(f"unknown path {path} (endpoints: /{', /'.join(ENDPOINTS)}, /mix)")
        params = parse_query(query)
        rng = _unseeded
        if endpoint == "mix":
            weights, seed = mix_args(params)
            rng = rng_for(seed)
            names = [e for e in MIX_ENDPOINTS if weights.get(e, 0) > 0]
            endpoint = rng.choices(names, [weights[e] for e in names])[0]
            args = endpoint_args(endpoint, params, prefixed=True)
        else:
            args = endpoint_args(endpoint, params)
        if endpoint == "stream":
            return _stream_response(args, start, queue_s)
        if endpoint == "db":
            query = db_query(args, rng)
            t0 = time.perf_counter()
            rows, phases.pool, phases.db = yield query
            phases.io = time.perf_counter() - t0
            body, content_type = _json_bytes([dict(zip(COLUMNS, row)) for row in rows]), "application/json"
        elif endpoint == "api":
            t0 = time.perf_counter()
            status_down, size, phases.api = yield api_call(args)
            phases.io = time.perf_counter() - t0
            if status_down != 200:
                raise BadGateway(f"api: the downstream service answered {status_down}")
            body, content_type = _json_bytes({"status": status_down, "bytes": size}), "application/json"
        else:
            body, content_type, io_s, blocking = _compute(endpoint, args, rng, app_kind, phases)
            if io_s > 0:
                t0 = time.perf_counter()
                yield Wait(io_s, blocking)
                phases.io = time.perf_counter() - t0
        status = 200
    except BadRequest as e:
        status, body, content_type = e.status, (str(e) + "\n").encode(), "text/plain"
    headers = [
        ("Server-Timing", server_timing(phases, time.perf_counter() - start, queue_s, gc_clock.total_s - gc0,
                                        throttle_clock.seconds() - held0)),
        ("X-Arena-Pid", str(os.getpid())),
        ("X-Arena-Thread", str(threading.get_native_id())),
        ("X-Arena-Endpoint", endpoint if status == 200 else "none"),
    ]
    return Response(status, body, content_type, headers)


# ---------------------------------------------------------------- drivers


def _blocking_sleep() -> Callable[[float], None]:
    """``time.sleep`` as it was before any gevent monkey-patching (it then blocks the hub)."""
    gevent_monkey = sys.modules.get("gevent.monkey")
    if gevent_monkey is not None and gevent_monkey.is_module_patched("time"):
        return gevent_monkey.get_original("time", "sleep")
    return time.sleep


# Event-loop timers (uvloop/libuv, gevent's hub) run on a cached, millisecond-grained loop clock and
# may fire up to ~1 ms early; the contract promises the whole wait, so every driver sleeps again
# for whatever is left until the wall clock says the wait is over.


def _wait_sync(op: Wait) -> None:
    sleep = _blocking_sleep() if op.blocking else time.sleep
    end = time.perf_counter() + op.seconds
    while (left := end - time.perf_counter()) > 0:
        sleep(left)


async def _wait_async(op: Wait) -> None:
    end = time.perf_counter() + op.seconds
    while (left := end - time.perf_counter()) > 0:
        if op.blocking:
            time.sleep(left)
        else:
            await asyncio.sleep(left)


def sync_parts(stream: Generator[Wait | bytes, None, None]):
    """A stream's parts in a thread (WSGI, Flask): each yielded once made, its waits slept."""
    for part in stream:
        if isinstance(part, Wait):
            _wait_sync(part)
        else:
            yield part


async def async_parts(stream: Generator[Wait | bytes, None, None]):
    """A stream's parts in an event loop (ASGI): each yielded once made, its waits awaited."""
    for part in stream:
        if isinstance(part, Wait):
            await _wait_async(part)
        else:
            yield part


def run_sync(path: str, query: str, request_start: str | None, app_kind: str) -> Response:
    """Drive :func:`handle` in a thread (WSGI servers, Flask)."""
    gen = handle(path, query, request_start, app_kind)
    try:
        op = next(gen)
        while True:
            if isinstance(op, Wait):
                _wait_sync(op)
                op = gen.send(None)
            else:
                from arena.subjects.python.backends import sync_io

                try:
                    result = sync_io(op)
                except BadRequest as e:
                    op = gen.throw(e)
                else:
                    op = gen.send(result)
    except StopIteration as done:
        return done.value


async def run_async(path: str, query: str, request_start: str | None, app_kind: str) -> Response:
    """Drive :func:`handle` in an event loop (ASGI): blocking waits block the loop on purpose. A
    request that waited behind another's blocking call, from its X-Request-Start (else its
    handler's start) to its answer, says how long in Server-Timing (``loop``)."""
    loop = asyncio.get_running_loop()
    lag, began = LoopLag.of(loop), loop.time()
    if request_start is not None:  # from its arrival: a blocked loop holds a request before its handler too
        try:
            began -= max(0.0, time.time() - parse_request_start(request_start))
        except BadRequest:
            pass  # handle() answers it
    resp = await _drive_async(handle(path, query, request_start, app_kind))
    loop_wait = waits(0.0, lag.during(began, loop.time()) - resp.blocked_s)
    if loop_wait:
        resp.headers = [(k, ", ".join([v, *loop_wait]) if k == "Server-Timing" else v) for k, v in resp.headers]
    return resp


async def _drive_async(gen) -> Response:
    blocked = 0.0
    try:
        op = next(gen)
        while True:
            if isinstance(op, Wait):
                await _wait_async(op)
                if op.blocking:
                    blocked += op.seconds  # the request's own blocking call: not a wait behind another's
                op = gen.send(None)
            else:
                from arena.subjects.python.backends import async_io

                try:
                    result = await async_io(op)
                except BadRequest as e:
                    op = gen.throw(e)
                else:
                    op = gen.send(result)
    except StopIteration as done:
        done.value.blocked_s = blocked
        return done.value


STATUS_TEXT = {200: "200 OK", 400: "400 Bad Request", 404: "404 Not Found", 502: "502 Bad Gateway",
               503: "503 Service Unavailable", 507: "507 Insufficient Storage"}


def wire_headers(resp: Response) -> list[tuple[str, str]]:
    """Every header of ``resp`` as sent (Content-Type and Content-Length first; a stream has no length)."""
    length = [] if resp.stream is not None else [("Content-Length", str(len(resp.body)))]
    return [("Content-Type", resp.content_type), *length] + resp.headers
