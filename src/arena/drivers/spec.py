"""What every driver shares: the load to drive (:class:`LoadSpec`) and what a driver can do
(:class:`Capabilities`, declared by each driver as data). The experiment reader refuses a
combination a driver cannot run when it reads the file, and each driver refuses it again from
the same declaration before it starts its tool."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from arena.errors import ArenaError
from arena.clients import Clients
from arena.mix import Mix
from arena.results.run_setup import ARRIVALS



@dataclass
class LoadSpec:
    """One load run. Duration and requests: at least one (``duration_s`` defaults to 10)."""

    url: str
    connections: int | None = None
    rate: float | None = None  # open model when set
    arrival: str = "constant"  # one of ARRIVALS, or SCHEDULE with ``schedule``
    schedule: Sequence[float] | None = None  # the open model's send times, seconds from the start, sorted
    duration_s: float | None = None
    requests: int | None = None
    warmup_s: float = 0.0
    think_ms: float = 0.0
    threads: int = 1
    method: str = "GET"
    headers: list[str] = field(default_factory=list)
    body: str | None = None
    mix: Mix | None = None  # weighted requests (arena.mix) instead of method + url's path
    keep_alive: bool = True
    delay_s: float = 0.0  # an emulated far client: one-way delay (arena-load only)
    upload_bps: int | None = None  # an emulated slow client: bytes per second sent, read (None: no cap)
    download_bps: int | None = None
    request_start: bool = False
    connect_timeout_s: float = 5.0
    timeout_s: float = 30.0
    interval_s: float = 1.0
    seed: int = 1
    allow_remote: bool = False
    expect_status: str | None = None  # the statuses that count as success (None: 2xx and 3xx)
    start_at: float | None = None  # begin at this time (seconds since the epoch): a load host released with others
    events: int | None = None  # the events each stream of server-sent events should hold (fewer: an error)

    @property
    def clients(self) -> Clients:
        """The clients this load stands for (plan.clients: one owner of what a link is)."""
        return Clients(self.keep_alive, self.delay_s, self.upload_bps, self.download_bps)


@dataclass(frozen=True)
class Capabilities:
    """What a driver can run and what its results hold."""

    tool: str
    models: tuple[str, ...]  # "closed", "open"
    bounds: tuple[str, ...]  # "duration", "requests": what can end a run
    methods: tuple[str, ...]
    bodies: bool  # can send a request body
    keep_alive_off: bool  # can open a connection per request
    live: bool  # figures while the run goes
    server_timing: bool  # reads the Server-Timing header
    balance: bool  # reads X-Arena-Pid: requests per worker process
    hdr: bool  # full latency histograms (HdrHistogram), not only a few percentiles
    expect_status: bool = False  # can be told which statuses count as success (else: its own rule)
    mixes: bool = False  # can send a weighted mix of requests (a mix file)
    link: bool = False  # can emulate slow or far clients (delay, upload and download caps)
    open_note: str = ""  # how the open model is run, where it is not arena-load's
    arrivals: tuple[str, ...] = ARRIVALS[:1]  # how an open model's sends can be spaced (of ARRIVALS)

    def problems(self, *, model: str, requests: bool, method: str, keep_alive: bool,
                 body: bool = False, expect_status: str | None = None,
                 mix: bool = False, link: bool = False, arrival: str = "constant") -> list[tuple[str, object, str]]:
        """(key, value, why) for each part of a run this driver cannot do; empty: it can."""
        out: list[tuple[str, object, str]] = []
        if model not in self.models:
            out.append(("load.model", model, f"{self.tool} has only the {' and '.join(self.models)} model"
                                             f" (load.model = \"{self.models[0]}\")"))
        if model == "open" and arrival not in self.arrivals:
            kinds = " or ".join(f'"{a}"' for a in self.arrivals)
            out.append(("load.arrival", arrival, f"{self.tool} spaces an open model's requests with arrival = "
                                                 f"{kinds} only"))
        if requests and "requests" not in self.bounds:
            out.append(("requests", "a request count",
                        "this driver runs for a duration, not a request count (use duration)"))
        ka = "" if self.keep_alive_off else "keep-alive "
        sends = f"it sends {ka}{'/'.join(self.methods)} requests only"
        if method not in self.methods:
            out.append(("method", method, f"method {method} is not supported by this driver ({sends})"))
        if not keep_alive and not self.keep_alive_off:
            out.append(("keep_alive", False, f"a connection per request is not supported by this driver ({sends})"))
        if body and not self.bodies:
            out.append(("body", "a body", "this driver sends no request body"))
        if mix and not self.mixes:
            out.append(("mix", "a mix file", f"{self.tool} sends one request, not a mix"))
        if link and not self.link:
            out.append(("clients", "a slow or far client", f"{self.tool} cannot emulate slow or far clients "
                                                           "(delay, upload, download)"))
        if expect_status is not None and not self.expect_status:
            out.append(("expect_status", expect_status, "this driver cannot be told which statuses are successes "
                                                        "(it counts its own: non-2xx)"))
        return out

    def check(self, spec: LoadSpec) -> None:
        """Refuse ``spec`` in one line if this driver cannot run it."""
        found = self.problems(model="open" if spec.rate is not None else "closed", requests=spec.requests is not None,
                              method=spec.method, keep_alive=spec.keep_alive, body=spec.body is not None,
                              expect_status=spec.expect_status, mix=spec.mix is not None,
                              link=spec.clients.link, arrival=spec.arrival)
        if found:
            raise ArenaError(f"driver = \"{self.tool}\": {found[0][2]}")
