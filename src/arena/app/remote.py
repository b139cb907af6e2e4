"""An experiment whose servers run on a host of their own: ``[cluster] server = "worker"``.

Its runs are made on the Dask worker that offers the arena-server resource: there each server is
started in its cgroup on that host's CPUs, sampled there (memory, CPU), and listens on that host's
address for the load, which comes from the load hosts (drivers/cluster.py: each run measures the
round trip to them and their clocks just before it, and keeps their figures); each run's
environment names the server's host. This machine only coordinates:

- the worker runs the same experiment file (its path: a filesystem shared with the worker, as the
  job arrays' shards have) into a copy of this store, so what is stored is not run again;
- each run's event comes back as it happens (a Dask queue), for the progress shown here;
- the worker's store comes back at the end and is merged into this one (app/merge.py: by run key,
  never twice; runs from a host of another CPU model kept apart, with a warning);
- Ctrl-C or SIGTERM here asks the worker to stop as they stop Arena: at the next run's start or end,
  the run in flight not kept, its server stopped, the load hosts' generators stopped;
- a server's host that leaves the cluster mid-experiment, or a scheduler that stops answering for
  STOP_WAIT_S, ends it here as a failed measurement (the host's runs do not come back): unwatched,
  its task waited for a worker that never comes, and this coordinator with it.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

from arena.drivers.cluster import (SCHEDULER_TIMEOUT_S, SERVER_RESOURCE, Host, close, connect, server_host, unanswered,
                                   workers_of)
from arena.errors import ArenaError, NotMeasured
from arena.plan.shard import Shard
from arena.runner import Event

POLL_S = 0.5  # how long the coordinator waits for an event before it looks at the task again
STOP_WAIT_S = 60.0  # after a stop, how long the server's host may take to end its run and send its store
LOOK_S = 5.0  # how often the coordinator asks the scheduler whether the server's host is still there


def run_on_server_host(path: str, name: str, store_path: str, address: str, on_event: Callable[[Event], None],
                       retake_invalid: bool = False, shard: Shard | None = None, *, run: Callable):
    """Run the experiment file (experiment ``name``) on the cluster's server host, by ``run`` (app/run.py
    run_file, which decides where runs are made: on the host, here), its runs merged into
    ``store_path``."""
    client = connect(address)  # first: it says so when distributed is not installed
    host = future = None
    run_id = uuid.uuid4().hex[:12]
    try:
        host = server_host(client, address)
        store = Path(store_path)
        copy = store.read_bytes() if store.exists() else b""
        events = _bounded_queue(f"arena-events-{run_id}", client)
        future = client.submit(_on_server_host, run, str(Path(path).resolve()), copy, host.ip, run_id, retake_invalid, shard,
                               key=f"arena-experiment-{run_id}", workers=[host.address], allow_other_workers=False,
                               resources={SERVER_RESOURCE: 1}, pure=False)
        watch = _Watch(client, address, host)
        while True:
            try:
                on_event(events.get(timeout=POLL_S, callback_timeout=SCHEDULER_TIMEOUT_S))
                continue
            except TimeoutError:  # no event (or no answer: the watch tells)
                pass
            if future.done():
                break
            watch.look()
        while events.qsize(callback_timeout=SCHEDULER_TIMEOUT_S):
            on_event(events.get(timeout=POLL_S, callback_timeout=SCHEDULER_TIMEOUT_S))
        if future.status == "error":
            e = future.exception(timeout=SCHEDULER_TIMEOUT_S)
            if isinstance(e, ArenaError):
                raise type(e)(f"on the server's host {host.name} ({host.ip}): {e}") from None
            raise ArenaError(f"on the server's host {host.name} ({host.ip}): {type(e).__name__}: {e}") from None
        counts, back = future.result(timeout=STOP_WAIT_S)
    except NotMeasured:  # the host's own failure, or the host or the scheduler gone: nothing comes back
        raise
    except TimeoutError:  # a query of the scheduler went unanswered (each is bounded)
        if future is None:
            raise ArenaError(unanswered(address)) from None
        raise NotMeasured(f"{unanswered(address)}: the runs on the server's host {host.name} ({host.ip}) are lost") \
            from None
    except BaseException:
        if future is not None:  # Ctrl-C, SIGTERM, a failure here: the worker stops too, and what it
            try:                # measured until then is kept
                client.run(_stop, workers=[host.address], on_error="ignore", callback_timeout=SCHEDULER_TIMEOUT_S)
                _, back = future.result(timeout=STOP_WAIT_S)
                _merge(back, store_path, name)
            except Exception:  # the host is gone, or took too long: its runs end with it
                pass
        raise
    finally:
        close(client)
    _merge(back, store_path, name)
    return counts


def _bounded_queue(name: str, client):
    """The Dask queue ``name``, made on the scheduler within SCHEDULER_TIMEOUT_S (TimeoutError: no
    answer): a Queue's own start waits for the scheduler's answer without a bound."""
    from distributed import Queue

    class Bounded(Queue):
        def _maybe_start(self):
            self.client.sync(self._start, callback_timeout=SCHEDULER_TIMEOUT_S)

    return Bounded(name, client=client)


class _Watch:
    """Whether the server's host is still in the cluster, asked every LOOK_S; NotMeasured once it has
    left, or once the scheduler has not answered for STOP_WAIT_S."""

    def __init__(self, client, address: str, host: Host):
        self.client, self.address, self.host = client, address, host
        self.answered = self.asked = time.monotonic()

    def look(self) -> None:
        if time.monotonic() - self.asked < LOOK_S:
            return
        self.asked = time.monotonic()
        try:
            present = workers_of(self.client)
        except TimeoutError:
            if self.asked - self.answered > STOP_WAIT_S:
                raise NotMeasured(f"{unanswered(self.address)}, for {STOP_WAIT_S:g} s mid-experiment: the runs on "
                                  f"the server's host {self.host.name} ({self.host.ip}) are lost") from None
            return
        self.answered = time.monotonic()
        if self.host.address not in present:
            raise NotMeasured(f"--cluster {self.address}: the server's host {self.host.name} ({self.host.ip}) left the "
                              "cluster mid-experiment: the runs it made are lost")


def _merge(store: bytes, store_path: str, name: str) -> None:
    """The server host's store (its copy of this one, and the runs it made) merged back: the
    experiment only, the others in the copy being this store's own."""
    from arena.app.merge import merge

    with tempfile.TemporaryDirectory(prefix="arena-remote-") as tmp:
        got = Path(tmp) / "server-host.db"
        got.write_bytes(store)
        merge([str(got)], store_path, only=name)


def _on_server_host(run_file: Callable, path: str, store: bytes, ip: str, run_id: str, retake_invalid: bool,
                    shard: Shard | None):
    """On the server's worker: the experiment run here by ``run_file``, its servers on ``ip``; (counts,
    the store)."""
    from distributed import Queue

    from arena.errors import Terminated, clear_stop

    clear_stop()  # a stop asked of an earlier experiment on this worker is not this one's
    events = Queue(f"arena-events-{run_id}")
    with tempfile.TemporaryDirectory(prefix="arena-server-host-") as tmp:
        db = Path(tmp) / "store.db"
        if store:
            db.write_bytes(store)
        try:
            counts = run_file(path, str(db), on_event=lambda e: e.kind == "live" or events.put(e),
                              retake_invalid=retake_invalid, shard=shard, server_host=ip)
        except (KeyboardInterrupt, Terminated):  # the coordinator's stop: the runs made so far go back
            counts = None
        return counts, db.read_bytes() if db.exists() else b""


def _stop(dask_worker=None) -> None:
    """Ask the experiment running on this worker to stop, as a signal asks Arena."""
    from arena.errors import ask_to_stop

    ask_to_stop(KeyboardInterrupt)
