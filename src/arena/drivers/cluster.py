"""Several load hosts for one run, on Dask distributed: ``arena load URL --cluster ADDRESS``.

- **The load hosts** are the scheduler's workers that offer the ``arena-load`` resource (started as
  ``dask worker ADDRESS --resources arena-load=1 --nthreads 1``); where none does, every worker but
  the server's host (the one offering ``arena-server``: app/remote.py).
- **Their shares**: the rate split evenly (each host an independent arrival process: its own seed;
  constant arrivals staggered by 1/rate, so that N hosts still send evenly spaced, not in bursts of N),
  the connections and a request bound split as evenly as whole numbers go.
- **One start**: each host's clock offset to this one is measured first (the least-delay of
  OFFSET_SAMPLES round trips, Cristian's method); the run is released by a common start time each
  host's arena-load waits for itself (``--start-at``, by its host's clock, offset corrected: the
  process already started, so its start-up is not in the spread). arena-load's own ``started_at``
  says when each began: a host that started more than LATE_MS after its planned start invalidates
  the run.
- **Exact merge**: results/combine.py (HdrHistogram buckets added, never percentiles averaged); each
  host's figures (offset, round trip, start, throughput, p99, CPU) are kept in the result's ``hosts``.
- **Faults**: a host lost or failing mid-run raises DriverFailed (the run is failed, with the reason)
  after the other hosts' arena-load processes are stopped, by the pids they started: nothing is half
  merged. Ctrl-C or SIGTERM stops every host's arena-load the same way. Every arena-load stops by
  itself at its run's end (its duration, its bound, arena-load's own limits): a coordinator that
  dies leaves nothing running anywhere.
- **Where the load may go**: loopback, or a host of the cluster (the scheduler's or any worker's
  address), and nothing else, refused before any connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from arena.drivers import native
from arena.drivers.spec import LoadSpec
from arena.errors import ArenaError, DriverFailed, stop_if_asked
from arena.results.combine import combine
from arena.results.load_result import LoadResult, from_dict, to_dict

RESOURCE = "arena-load"  # the worker resource that marks a load host
SERVER_RESOURCE = "arena-server"  # the one that marks the server's host ([cluster] server = "worker")
OFFSET_SAMPLES = 5  # round trips to each host to measure its clock offset
START_MARGIN_S = 1.0  # from sending the plan to the common start (plus a few round trips)
LATE_MS = 50.0  # a host that starts later than this after its planned start invalidates the run
CONNECT_TIMEOUT_S = 10.0
SLACK_S = 15.0  # past the run's longest possible end, a host that has not answered is lost
POLL_S = 0.2  # how often the coordinator looks for a lost host while the run goes
# a query of the scheduler unanswered this long ends (a stalled connection): a run's first query then
# fails it, a query while it goes is asked again at the next look; unbounded, one answer that never
# came held a run, and the experiment, forever
SCHEDULER_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Host:
    address: str  # the worker's, tcp://ip:port
    name: str
    ip: str
    marked: bool  # offers the RESOURCE (then its task asks for it)
    offset_s: float = 0.0  # its clock minus this one's
    rtt_s: float = 0.0  # the round trip of the offset's sample


# ---------------------------------------------------------------------- pure


def shares(spec: LoadSpec, n: int) -> list[LoadSpec]:
    """The ``n`` hosts' shares of ``spec`` (the sum of the shares is ``spec``)."""
    if n < 1:
        raise ValueError("no load host")
    if spec.requests is not None and spec.duration_s is None:
        raise ArenaError("--requests with --cluster needs --duration too: every host's run ends in time")

    def split(total: int | None, least: int, what: str) -> list[int | None]:
        if total is None:
            return [None] * n
        if total < least * n:
            raise ArenaError(f"{what} {total} cannot be split over {n} load hosts (at least {least} each)")
        return [total // n + (1 if i < total % n else 0) for i in range(n)]

    conns = split(spec.connections, 1, "--connections")
    requests = split(spec.requests, 1, "--requests")
    return [replace(spec, rate=spec.rate / n if spec.rate is not None else None, connections=conns[i],
                    requests=requests[i], seed=spec.seed + i, allow_remote=True) for i in range(n)]


def stagger_s(spec: LoadSpec, i: int) -> float:
    """Host ``i``'s start after the common start: constant arrivals interleaved (1/rate apart)."""
    return i / spec.rate if spec.rate and spec.arrival == "constant" else 0.0


def check_target(url: str, allowed: set[str]) -> None:
    """Loopback or one of the cluster's hosts (``allowed``: their IP addresses), else an error."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ArenaError(f"URL: {host!r} is not an IP address: with --cluster the target is loopback or one of "
                         f"the cluster's hosts ({', '.join(sorted(allowed))})") from None
    if not ip.is_loopback and str(ip) not in allowed:
        raise ArenaError(f"URL: {ip} is neither loopback nor a host of the cluster ({', '.join(sorted(allowed))}): "
                         "load goes nowhere else")


def late_ms(result: LoadResult, planned: float, offset_s: float) -> float | None:
    """How long after its planned start (this host's clock) a host's arena-load began."""
    started = (result.raw or {}).get("started_at")
    return None if started is None else (started - offset_s - planned) * 1000


# ---------------------------------------------------------------------- on a load host (a Dask worker)

_running: dict[str, Any] = {}  # run id -> the arena-load process this worker started for it
_lock = threading.Lock()


def _host_run(spec: LoadSpec, start_at: float, run_id: str, cpus: list[int] | None) -> dict:
    """Run arena-load at once, to begin at the common start by this host's clock (``--start-at``: it
    waits for it itself, started and ready), and return its result."""

    def started(proc) -> None:
        with _lock:
            _running[run_id] = proc

    try:
        return to_dict(native.run(replace(spec, start_at=start_at), cpus=cpus, started=started))
    finally:
        with _lock:
            _running.pop(run_id, None)


def _host_stop(run_id: str) -> bool:
    """Stop this worker's arena-load of ``run_id`` (by the process it started); whether there was one."""
    import signal

    with _lock:
        proc = _running.get(run_id)
    if proc is None or proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGTERM)
    return True


# ---------------------------------------------------------------------- the coordinator


def connect(address: str):
    """A client of the scheduler at ``address``, once the scheduler has answered a first query within
    SCHEDULER_TIMEOUT_S: a client's own start is not bounded where the scheduler takes the connection
    but never answers (a stopped or stalled one: it waited there for minutes)."""
    try:
        from distributed import Client
    except ImportError:
        raise ArenaError(f"--cluster {address}: needs Dask's distributed, which is not installed "
                         "(pip install 'arena[cluster]')") from None
    try:
        asyncio.run(asyncio.wait_for(_identity(address), SCHEDULER_TIMEOUT_S))
        return Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except TimeoutError:
        raise ArenaError(unanswered(address)) from None
    except OSError as e:
        raise ArenaError(f"--cluster {address}: no Dask scheduler answered ({e})") from None


async def _identity(address: str) -> dict:
    from distributed.core import rpc

    async with rpc(address, timeout=CONNECT_TIMEOUT_S) as scheduler:
        return await scheduler.identity()


def workers_of(client) -> dict[str, dict]:
    """The cluster's workers as the scheduler knows them (TimeoutError: no answer within
    SCHEDULER_TIMEOUT_S)."""
    return client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=SCHEDULER_TIMEOUT_S)["workers"]


def close(client) -> None:
    """The client closed, waiting at most SCHEDULER_TIMEOUT_S for the scheduler to take its leave."""
    try:
        client.close(timeout=SCHEDULER_TIMEOUT_S)
    except TimeoutError:  # a stalled scheduler: the connection ends with this process
        pass


def unanswered(address: str) -> str:
    """What a query of the scheduler that went unanswered (a TimeoutError) is said as."""
    return f"--cluster {address}: the scheduler did not answer within {SCHEDULER_TIMEOUT_S:g} s"


def _host(address: str, w: dict, marked: bool) -> Host:
    return Host(address, str(w.get("name", address)), w.get("host") or urlsplit(address).hostname or "", marked)


def hosts(cluster: dict[str, dict]) -> list[Host]:
    """The load hosts among the ``cluster``'s workers (workers_of), in a stable order (by name): the
    workers offering RESOURCE, else every worker but the server's."""
    workers = {a: w for a, w in cluster.items() if not w.get("resources", {}).get(SERVER_RESOURCE)}
    marked = {a: w for a, w in workers.items() if w.get("resources", {}).get(RESOURCE)}
    return [_host(a, w, bool(marked))
            for a, w in sorted((marked or workers).items(), key=lambda aw: (str(aw[1].get("name", aw[0])), aw[0]))]


def server_host(client, address: str) -> Host:
    """The one worker offering SERVER_RESOURCE (an error naming the cluster where none or several do)."""
    found = [(a, w) for a, w in workers_of(client).items() if w.get("resources", {}).get(SERVER_RESOURCE)]
    if len(found) != 1:
        raise ArenaError(f"--cluster {address}: {len(found)} workers offer the {SERVER_RESOURCE} resource; the server's "
                         f"host is one (dask worker ... --resources {SERVER_RESOURCE}=1)")
    return _host(*found[0], True)


def cluster_ips(scheduler: str, cluster: dict[str, dict]) -> set[str]:
    """The addresses of the cluster's hosts (where load may go): the ``scheduler``'s (its address)
    and every worker's of ``cluster`` (workers_of)."""
    return {urlsplit(scheduler).hostname or ""} | {_host(a, w, False).ip for a, w in cluster.items()}


def offsets(client, found: list[Host]) -> list[Host]:
    """Each host with its clock offset and round trip (the least-delay sample of OFFSET_SAMPLES)."""
    out = []
    for h in found:
        best = None
        for _ in range(OFFSET_SAMPLES):
            t0 = time.time()
            there = client.run(time.time, workers=[h.address], callback_timeout=SCHEDULER_TIMEOUT_S)[h.address]
            t1 = time.time()
            if best is None or t1 - t0 < best[1]:
                best = (there - (t0 + t1) / 2, t1 - t0)
        out.append(replace(h, offset_s=best[0], rtt_s=best[1]))
    return out


def run(spec: LoadSpec, address: str, cpus: list[int] | None = None) -> LoadResult:
    """``spec`` over the cluster's load hosts, merged into one result (``hosts``: each one's figures)."""
    client = connect(address)
    futures = []
    try:
        workers = workers_of(client)  # once: the load hosts and where load may go
        found = hosts(workers)
        if not found:
            raise ArenaError(f"--cluster {address}: the scheduler has no worker")
        check_target(spec.url, cluster_ips(client.scheduler.address, workers))
        found = offsets(client, found)
        parts = shares(spec, len(found))
        run_id = uuid.uuid4().hex[:12]
        start = time.time() + START_MARGIN_S + 4 * max(h.rtt_s for h in found)
        planned = [start + stagger_s(spec, i) for i in range(len(found))]
        futures = [client.submit(_host_run, part, planned[i] + h.offset_s, run_id, cpus, key=f"arena-load-{run_id}-{i}",
                                 workers=[h.address], allow_other_workers=False, pure=False,
                                 resources={RESOURCE: 1} if h.marked else None)
                   for i, (h, part) in enumerate(zip(found, parts))]
        deadline = planned[-1] + _longest_s(spec) + SLACK_S
        try:
            lost = _watch(client, futures, found, deadline)
        except BaseException:  # Ctrl-C or SIGTERM: the user asked to stop, the hosts' arena-load too
            _stop_all(client, found, run_id)
            raise
        if lost:
            stopped = _stop_all(client, found, run_id)
            if stopped:
                client.cancel(futures)
            raise DriverFailed(f"load host {lost}: the run is invalid; " + (
                "the other hosts' arena-load were stopped" if stopped else
                "the scheduler does not answer: each host's arena-load ends at its run's end"))
        results = [from_dict(f.result(timeout=SCHEDULER_TIMEOUT_S)) for f in futures]
    except TimeoutError:  # a query of the scheduler went unanswered (each is bounded); once the hosts ran,
        # their arena-load ended by itself and only the results are lost
        raise DriverFailed(unanswered(address) + ("; the run's results are lost" if futures else "")) from None
    finally:
        close(client)
    figures = [_figures(h, r, planned[i], parts[i]) for i, (h, r) in enumerate(zip(found, results))]
    return combine(results, figures)


def _longest_s(spec: LoadSpec) -> float:
    """The longest a host's run may take (arena-load stops by itself by then)."""
    return spec.warmup_s + (spec.duration_s or 10.0) + spec.timeout_s + spec.connect_timeout_s


def _watch(client, futures, found: list[Host], deadline: float) -> str:
    """Wait for every host's result; '' when all came, else which host was lost and why."""
    while True:
        time.sleep(POLL_S)
        stop_if_asked()  # a signal, or a coordinator above this one (app/remote.py), asked to stop
        for f, h in zip(futures, found):
            if f.status == "error":
                return f"{h.name} ({h.ip}) failed: {_reason(f)}"
            if f.status == "cancelled":
                return f"{h.name} ({h.ip}): its task was cancelled"
        if all(f.status == "finished" for f in futures):
            return ""
        try:
            present = workers_of(client)
        except TimeoutError:  # no answer this time: asked again at the next look, the deadline still holds
            present = None
        for f, h in zip(futures, found):
            if present is not None and f.status == "pending" and h.address not in present:
                return f"{h.name} ({h.ip}) was lost mid-run (its worker left the cluster)"
        if time.time() > deadline:
            late = [h.name for f, h in zip(futures, found) if f.status != "finished"]
            return f"{', '.join(late)}: no result {SLACK_S:.0f} s past the run's end"


def _reason(future) -> str:
    try:
        e = future.exception(timeout=1)
    except Exception as why:  # the exception itself could not be fetched: the host is gone
        return type(why).__name__
    return str(e) or type(e).__name__


def _stop_all(client, found: list[Host], run_id: str) -> bool:
    """Stop the run's arena-load on every host still in the cluster (a lost one's ends by itself);
    False where the scheduler does not answer: nothing is asked through it then (a request would
    wait on it too), and each host's arena-load ends at its run's end by itself."""
    try:
        present = workers_of(client)
    except TimeoutError:
        return False
    for h in [h for h in found if h.address in present]:
        try:
            client.run(_host_stop, run_id, workers=[h.address], on_error="ignore",
                       callback_timeout=SCHEDULER_TIMEOUT_S)
        except Exception:  # gone meanwhile: its arena-load ends at its run's end by itself
            pass
    return True


def _figures(h: Host, r: LoadResult, planned: float, part: LoadSpec) -> dict[str, Any]:
    """One host's own figures, kept beside the merged result."""
    late = late_ms(r, planned, h.offset_s)
    rt = r.measured.response_time
    return {"name": h.name, "address": h.address, "ip": h.ip, "offset_ms": h.offset_s * 1000,
            "rtt_ms": h.rtt_s * 1000, "late_ms": late, "rate": part.rate, "connections": part.connections,
            "completed": r.measured.completed, "errors": r.measured.errors, "achieved_rps": r.measured.achieved_rps,
            "p99_us": rt.p("99") if rt else None, "cpu_per_request_us": r.cpu_per_request_us,
            "saturated": r.saturated, "problem": (f"started {late:.0f} ms after the common start (at most {LATE_MS:g} ms)"
                                                  if late is not None and late > LATE_MS else None)}
