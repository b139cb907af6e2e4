"""Arena's timing around a user's WSGI or ASGI app (standard library only: it is imported by the
server in the app's own Python environment, from this directory on PYTHONPATH).

The server is given ``arena_wrap:wsgi`` or ``arena_wrap:asgi`` (``ARENA_USER_INTERFACE`` says which);
the user's app is ``ARENA_USER_APP`` (``module:callable``, ``module:factory()`` to call a factory),
imported from ``ARENA_USER_DIR`` (first on sys.path). Every HTTP response gains

- ``Server-Timing``: ``queue`` (from ``X-Request-Start`` to the wrapper's start), ``app`` (the whole
  handler, body included), ``cpu`` (CPU time of the request's own code) and ``cpuwall`` (the time the
  request's code was running or ready to run: WSGI, its thread's CPU time plus its wait for a core,
  from /proc/thread-self/schedstat; ASGI, the wall time of the request's coroutine steps). So
  ``cpuwall - cpu`` is the wait for a core (and, in ASGI, for the GIL during a step); a WSGI thread's
  wait for the GIL is off-CPU like I/O and stays in ``app - cpuwall``; ``gc``, the process's time
  in the garbage collector while the request was in flight, where a collection ran; and, in ASGI,
  ``loop``, the time its event loop sat blocked by another request's call that did not yield, where
  it did (LoopLag). The app's own Server-Timing metrics are kept (its header is left as it is; the
  names queue, app, cpu, cpuwall, gc and loop are Arena's). Arena's subject apps use the same gc
  clock and LoopLag.
- ``X-Arena-Pid`` and ``X-Arena-Thread``.

A response the app gives whole (ASGI: one body message; WSGI: a list of chunks, or an iterator
with a Content-Length) is collected before the headers go out, so the timing covers its body; a
WSGI one without Content-Length or Transfer-Encoding gets its Content-Length. A **stream** (ASGI: a
body message with more to come; WSGI: an iterator without Content-Length: server-sent events, a
language model's tokens) passes through as the app sends it, never held back: its head leaves
with its first part, carrying what is known then, ``queue``, ``start`` (the wrapper's start to the
app's response start) and ``first`` (to its first part); its end is the client's to measure
(arena-load's time to the last event).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
import time

_SCHEDSTAT = "/proc/thread-self/schedstat"


def _load():
    target = os.environ.get("ARENA_USER_APP", "")
    where = os.environ.get("ARENA_USER_DIR")
    if where and where not in sys.path:
        sys.path.insert(0, where)
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise RuntimeError(f"ARENA_USER_APP: must be module:callable, got '{target}'")
    factory = attr.endswith("()")
    module = obj = importlib.import_module(module_name)
    for part in attr.removesuffix("()").split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RuntimeError(f"ARENA_USER_APP: module '{module_name}' has no attribute '{attr}'"
                               f"{_namespace(module)}") from None
    obj = obj() if factory else obj
    if not callable(obj):
        raise RuntimeError(f"ARENA_USER_APP: {target} is not callable")
    return obj


def _namespace(module) -> str:
    """Why a module may lack the app: it is a namespace package (a directory without __init__.py,
    such as a checkout named like the package, found on the path before the installed one)."""
    if getattr(module, "__file__", None) is None and hasattr(module, "__path__"):
        where = ", ".join(dict.fromkeys(module.__path__))  # a server may add the directory twice
        return (f" (it is the directory {where}, a folder without __init__.py: is a same-named folder "
                "shadowing the module, or is the module not installed in this environment?)")
    return ""


class _Schedstat(threading.local):
    """This thread's /proc/thread-self/schedstat, opened once per thread (on first use, in the thread)
    and re-read in place: a pread costs about 1.5 µs, an open and read 13. The file closes with the
    thread's local state."""

    def __init__(self):
        try:
            self.file = open(_SCHEDSTAT, "rb", buffering=0)
        except OSError:
            self.file = None

    def run_queue_s(self) -> float:
        """The thread's time waiting for a core so far (the second field, ns); 0 where absent."""
        if self.file is None:
            return 0.0
        try:
            return int(os.pread(self.file.fileno(), 128, 0).split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return 0.0


_schedstat = _Schedstat()


def _queue_ms(value: str | None, now: float) -> float | None:
    """``X-Request-Start: t=<µs since the epoch>`` (or s.fraction, ms) -> the wait until ``now``, ms."""
    if not value:
        return None
    text = value.strip().removeprefix("t=")
    try:
        if "." in text:
            at = float(text)
        else:
            n = int(text)
            at = n / 1e6 if n >= 10**15 else n / 1e3 if n >= 10**12 else float(n)
    except ValueError:
        return None
    return max(0.0, (now - at) * 1000)


class GcClock:
    """The process's time in the garbage collector so far (gc.callbacks: each collection's start and
    stop). A collection holds the GIL: every thread of the process waits for it, so a request's share
    is the collections that ran while it was in flight, whichever thread triggered them."""

    def __init__(self):
        self.total_s, self.began = 0.0, 0.0
        gc.callbacks.append(self.tick)

    def tick(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.began = time.perf_counter()
        else:
            self.total_s += time.perf_counter() - self.began


gc_clock = GcClock()


class ThrottleClock:
    """The server's cgroup's throttled time so far, under a CPU quota: the cpu.stat Arena names in
    ARENA_CPU_STAT (cgroup v1's throttled_time in ns, v2's throttled_usec), opened once and re-read
    in place (a pread: a few microseconds). 0 without a quota. The time is the group's: a request
    during which it grew met the quota, whichever thread spent it."""

    def __init__(self, path: str | None):
        self.fd = None
        if path:
            try:
                self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self.fd = None

    def seconds(self) -> float:
        if self.fd is None:
            return 0.0
        try:
            text = os.pread(self.fd, 4096, 0).decode()
        except OSError:
            return 0.0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "throttled_usec":
                return int(value) / 1e6
            if key == "throttled_time":
                return int(value) / 1e9
        return 0.0


throttle_clock = ThrottleClock(os.environ.get("ARENA_CPU_STAT"))


class LoopLag:
    """How long an event loop sat blocked by calls that waited without yielding, and when.

    A timer set every TICK_S runs late by whatever the loop did meanwhile: other requests' CPU, a
    wait for a core the machine gave to another process, or a call that waited (a blocking read,
    ``time.sleep``) while the process used no CPU. Each late run keeps its stretch (due, ran) and the
    blocked part of it: the lateness less the process's CPU time and the loop thread's wait for a
    core (its schedstat run queue time) over the stretch. A request's share is the blocked part of the stretches it was in flight
    for, in proportion to the overlap (and of the stretch still running when it ends)."""

    TICK_S = 0.005
    LATE_S = 0.001  # lateness below this is the loop's own jitter
    KEPT = 4096  # stretches remembered (a request far longer than KEPT ticks sees the latest only)

    def __init__(self, loop):
        from collections import deque

        self.loop, self.stretches = loop, deque(maxlen=self.KEPT)
        self.ran, self.cpu, self.run_queue = loop.time(), time.process_time(), _schedstat.run_queue_s()
        self.due = self.ran + self.TICK_S
        loop.call_at(self.due, self._tick)

    def _blocked(self, now: float, cpu: float, run_queue: float) -> float:
        return max(0.0, (now - self.due) - (cpu - self.cpu) - (run_queue - self.run_queue))

    def _tick(self) -> None:
        now, cpu, run_queue = self.loop.time(), time.process_time(), _schedstat.run_queue_s()
        if now - self.due > self.LATE_S and (blocked := self._blocked(now, cpu, run_queue)) > self.LATE_S:
            self.stretches.append((self.due, now, blocked))
        self.ran, self.cpu, self.run_queue, self.due = now, cpu, run_queue, now + self.TICK_S
        self.loop.call_at(self.due, self._tick)

    def during(self, start: float, end: float) -> float:
        """Seconds of blocked loop while a request was in flight from ``start`` to ``end`` (loop.time())."""
        spans = list(self.stretches)
        if end - self.due > self.LATE_S:  # the loop is late right now: the stretch is still running
            spans.append((self.due, end, self._blocked(end, time.process_time(), _schedstat.run_queue_s())))
        total = 0.0
        for due, ran, blocked in reversed(spans):
            if ran <= start:
                break
            total += blocked * max(0.0, min(ran, end) - max(due, start)) / (ran - due)
        return total

    _of: dict = {}

    @classmethod
    def of(cls, loop) -> "LoopLag":
        """The loop's own, started at its first request."""
        lag = cls._of.get(id(loop))
        if lag is None or lag.loop is not loop:
            lag = cls._of[id(loop)] = cls(loop)
        return lag


def _timing(queue_ms: float | None, app_s: float, cpu_s: float, cpuwall_s: float, gc_s: float = 0.0,
            loop_s: float = 0.0, throttled_s: float = 0.0) -> str:
    parts = [] if queue_ms is None else [f"queue;dur={queue_ms:.3f}"]
    parts += [f"app;dur={app_s * 1000:.3f}", f"cpu;dur={cpu_s * 1000:.3f}", f"cpuwall;dur={max(cpuwall_s, cpu_s) * 1000:.3f}"]
    return ", ".join(parts + waits(gc_s, loop_s, min(throttled_s, app_s)))


def waits(gc_s: float, loop_s: float, throttled_s: float = 0.0) -> list[str]:
    """``gc``, ``loop`` and ``throttled`` for a request that met a collection, waited behind a blocked
    event loop or met its CPU quota's throttling (the group's throttled time while it was in flight,
    at most its own time): only such requests say so, so each metric's count is how many did."""
    return ([f"gc;dur={gc_s * 1000:.3f}"] if gc_s > 0 else []) + (
        [f"loop;dur={loop_s * 1000:.3f}"] if loop_s >= LoopLag.LATE_S else []) + (
        [f"throttled;dur={throttled_s * 1000:.3f}"] if throttled_s > 0 else [])


def _ids() -> list[tuple[str, str]]:
    return [("X-Arena-Pid", str(os.getpid())), ("X-Arena-Thread", str(threading.get_native_id()))]


def _stream_timing(queue_ms: float | None, start_s: float, first_s: float | None = None) -> str:
    """A stream's head: the queue, the time to the app's response start and to its first chunk."""
    parts = [] if queue_ms is None else [f"queue;dur={queue_ms:.3f}"]
    parts.append(f"start;dur={start_s * 1000:.3f}")
    return ", ".join(parts + ([f"first;dur={first_s * 1000:.3f}"] if first_s is not None else []))


def _streamed(headers) -> bool:
    """Whether a response is a stream: its length is not told (no Content-Length)."""
    return not any((k.decode("latin-1") if isinstance(k, bytes) else k).lower() == "content-length" for k, _ in headers)


def wrap_wsgi(app):
    def timed(environ, start_response):
        now, start, cpu0, rq0 = time.time(), time.perf_counter(), time.thread_time(), _schedstat.run_queue_s()
        gc0, held0 = gc_clock.total_s, throttle_clock.seconds()
        queue = _queue_ms(environ.get("HTTP_X_REQUEST_START"), now)
        answer: list = []
        chunks: list[bytes] = []
        started: list[float] = []  # when the app started its response (a stream's head says so)

        def start_response_later(status, headers, exc_info=None):
            answer[:] = [status, list(headers)]  # nothing is sent before the app returns: the last call counts
            started[:] = [time.perf_counter()]
            return chunks.append  # the legacy write() callable

        body = app(environ, start_response_later)
        if not isinstance(body, (list, tuple)):  # an iterator: the first chunk starts its response
            it = iter(body)
            try:
                first = next(it, None)
            except BaseException:
                if hasattr(body, "close"):
                    body.close()
                raise
            if answer and _streamed(answer[1]):
                status, headers = answer
                headers += [("Server-Timing", _stream_timing(queue, started[0] - start, time.perf_counter() - start)),
                            *_ids()]
                start_response(status, headers)
                return _through(first, it, body)
            chunks.extend([first] if first is not None else [])
            body = _Rest(it, body)
        try:
            chunks.extend(body)
        finally:
            if hasattr(body, "close"):
                body.close()
        cpu = time.thread_time() - cpu0
        wall = time.perf_counter() - start
        status, headers = answer
        headers += [("Server-Timing", _timing(queue, wall, cpu, cpu + _schedstat.run_queue_s() - rq0,
                                              gc_clock.total_s - gc0, 0.0, throttle_clock.seconds() - held0)),
                    *_ids()]
        if _unframed(environ, status, headers):
            headers.append(("Content-Length", str(sum(map(len, chunks)))))
        start_response(status, headers)
        return chunks

    return timed


class _Rest:
    """The chunks of a WSGI body after its first (already read), with the body's close."""

    def __init__(self, it, body):
        self.it, self.body = it, body

    def __iter__(self):
        return self.it

    def close(self):
        if hasattr(self.body, "close"):
            self.body.close()


def _through(first, it, body):
    """A stream's chunks as the app makes them, its first already read; the body closed at the end
    (the server closes this generator, which closes the app's body: PEP 3333)."""
    try:
        if first is not None:
            yield first
        yield from it
    finally:
        if hasattr(body, "close"):
            body.close()


def _unframed(environ, status: str, headers: list) -> bool:
    """Whether a response the wrapper holds whole needs its Content-Length: the app gave neither it nor
    Transfer-Encoding, and the response has a body. Most servers frame such a response themselves
    (chunked, or a close); uWSGI's --http11-socket sends it with no framing at all, so a kept-alive
    client can only end it by a timeout."""
    if environ.get("REQUEST_METHOD") == "HEAD" or status[:3] in ("204", "304") or status[:1] == "1":
        return False
    return not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers)


class _Steps:
    """Drives a coroutine, adding up the CPU and wall time of its own steps: what the request's code
    took, not the other requests the event loop ran in between."""

    def __init__(self, coro):
        self.coro, self.cpu, self.wall = coro, 0.0, 0.0

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        return self.send(None)

    def _step(self, how, *args):
        c, w = time.thread_time(), time.perf_counter()
        try:
            return how(*args)
        finally:
            self.cpu += time.thread_time() - c
            self.wall += time.perf_counter() - w

    def send(self, value):
        return self._step(self.coro.send, value)

    def throw(self, *exc):
        return self._step(self.coro.throw, *exc)

    def close(self):
        return self.coro.close()


def wrap_asgi(app):
    async def timed(scope, receive, send):
        if scope.get("type") != "http":
            return await app(scope, receive, send)
        now, start, gc0, held0 = time.time(), time.perf_counter(), gc_clock.total_s, throttle_clock.seconds()
        request_start = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                              if k.lower() == b"x-request-start"), None)
        queue = _queue_ms(request_start, now)
        import asyncio

        loop = asyncio.get_running_loop()
        lag, began = LoopLag.of(loop), loop.time() - (queue or 0.0) / 1000  # from its arrival
        held: list[dict] = []
        started: list[float] = []  # when the app sent its response's start (s from the wrapper's start)
        streaming: list[bool] = []  # [True] once the app streams (a body part with more to come): it passes through

        async def send_later(message):
            if streaming:
                await send(message)
                return
            if message["type"] == "http.response.start":
                started.append(time.perf_counter() - start)
            held.append(message)  # sent once the app returns (below), unless it streams
            if message["type"] == "http.response.body" and message.get("more_body") and held[0]["type"] == \
                    "http.response.start":
                streaming.append(True)  # a stream: its head now, with what is known, and the rest as it comes
                head = dict(held[0])
                head["headers"] = [*head.get("headers", ()),
                                   (b"server-timing", _stream_timing(queue, started[0],
                                                                     time.perf_counter() - start).encode()),
                                   *((k.lower().encode(), v.encode()) for k, v in _ids())]
                for m in [head, *held[1:]]:
                    await send(m)
                held.clear()

        steps = _Steps(app(scope, receive, send_later))
        await steps
        if streaming:
            return
        wall = time.perf_counter() - start
        # the loop's blocked time while it was in flight, less its own steps' blocking (their wall beyond CPU)
        waited = lag.during(began, loop.time()) - max(0.0, steps.wall - steps.cpu)
        for message in held:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", ()),
                                      (b"server-timing", _timing(queue, wall, steps.cpu, steps.wall,
                                                                 gc_clock.total_s - gc0, waited,
                                                                 throttle_clock.seconds() - held0).encode()),
                                      *((k.lower().encode(), v.encode()) for k, v in _ids())]
            await send(message)

    return timed


# The server is given ``arena_wrap:wsgi`` or ``arena_wrap:asgi``: real module attributes, bound when
# the server imports this module. A server may resolve the name by evaluating it over the module's
# namespace (hypercorn: ``eval(name, vars(module))``) or by reading its __dict__, neither of which
# reaches a module __getattr__. The interface comes from ARENA_USER_INTERFACE (launch sets it); a
# module imported without it binds neither. Loading here also makes an app that cannot be imported
# fail the server's start, with its traceback in the server's log.
_INTERFACE = os.environ.get("ARENA_USER_INTERFACE")
if _INTERFACE == "wsgi":
    wsgi = wrap_wsgi(_load())
elif _INTERFACE == "asgi":
    asgi = wrap_asgi(_load())
