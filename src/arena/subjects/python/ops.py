"""What the subject's handler yields to its driver (a wait, a database query, a call to the
downstream service) and the errors it answers with a status: the words the workload
(workload.py) and the backends that perform its queries and calls (backends.py) share, so
neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass


class BadRequest(Exception):
    """A request the contract rejects; the message is the one-line body."""

    status = 400


class NotFound(BadRequest):
    status = 404


class Unavailable(BadRequest):
    """A service the request needs is missing, or no pooled connection came in time."""

    status = 503


class BadGateway(BadRequest):
    """The downstream service failed."""

    status = 502


class InsufficientStorage(BadRequest):
    """/leak would keep more than its bound."""

    status = 507


@dataclass
class Wait:
    """A wait the driver performs: ``blocking`` waits must hold the thread and any event loop."""

    seconds: float
    blocking: bool = False


@dataclass
class Query:
    """A database round trip the driver performs with its process's pool; it sends back
    (rows, seconds waiting for a connection, seconds of the query)."""

    sql: str
    params: tuple
    fetch: bool  # rows come back (else the status of a write)


@dataclass
class Call:
    """A GET to the downstream service the driver performs on its kept-alive connection; it sends
    back (status, body length, seconds)."""

    target: str
