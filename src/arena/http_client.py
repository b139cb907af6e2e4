"""A minimal HTTP/1.1 client for control traffic (readiness, conformance): never for load.

A thin layer over the standard library's http.client (a unix socket, a GET retried once on a dropped
keep-alive, Server-Timing read), kept rather than httpx: measured with benches/http_client.py, httpx
costs 2.0x the import (69 against 35 ms, paid by every command that starts a server) and 2.5x a
kept-alive request (344 against 140 us, the readiness poll's and conformance checks' cost), and
Arena's own requests need none of what it adds (HTTP/2, TLS, async, redirects, cookies)."""

from __future__ import annotations

import http.client
import socket
from dataclasses import dataclass

from arena.errors import ArenaError


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def timing(self) -> dict[str, float]:
        """Server-Timing -> {metric: milliseconds}."""
        return server_timing(self.headers.get("server-timing", ""))


def server_timing(value: str) -> dict[str, float]:
    """A Server-Timing value (``app;dur=1.5, cpu;dur=0.2``) -> {metric: milliseconds}."""
    out = {}
    for part in value.split(","):
        name, _, rest = part.strip().partition(";")
        if rest.startswith("dur="):
            out[name] = float(rest[4:])
    return out


@dataclass
class Streamed(Reply):
    """A streamed reply: its server-sent events' blocks (``body`` split at blank lines) and when each
    arrived, in seconds after the request was sent."""

    parts: list[tuple[float, bytes]]


def joined(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Header fields by lower-cased name, a repeated one joined with ", " (as RFC 9110 combines a
    list-valued field: two Server-Timing headers, the app's and Arena's, are one list)."""
    out: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (the Host header says localhost)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Client:
    """One keep-alive connection to host:port (or to the unix socket ``unix``), reopened when the
    server closes it."""

    def __init__(self, host: str, port: int, timeout: float = 10.0, unix: str | None = None):
        self.conn = (_UnixConnection(unix, timeout) if unix is not None
                     else http.client.HTTPConnection(host, port, timeout=timeout))

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        return self.request("GET", path, headers=headers)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                resp = self.conn.getresponse()
                data = resp.read()
                return Reply(resp.status, joined(resp.getheaders()), data)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()  # the server closed an idle keep-alive connection: retry a GET once
                if attempt == 2 or method != "GET":
                    raise
        raise AssertionError("unreachable")

    def stream(self, path: str, headers: dict[str, str] | None = None) -> Streamed:
        """GET ``path`` and read its body as it arrives (chunked or to the connection's close)."""
        import time

        sent = time.perf_counter()
        self.conn.request("GET", path, headers=headers or {})
        resp = self.conn.getresponse()
        body, parts, ended = b"", [], 0
        while data := resp.read1(65536):
            body += data
            at = time.perf_counter() - sent
            while (end := body.find(b"\n\n", ended)) >= 0:
                parts.append((at, body[ended:end]))
                ended = end + 2
        resp.close()  # read to its end: the connection is reused, or reopened where the server closes it
        return Streamed(resp.status, joined(resp.getheaders()), body, parts)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def port_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port (TIME_WAIT leftovers do not count)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def check_host(host: str) -> None:
    """Refuse, in one line, an address this machine cannot listen on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, 0))
        except (OSError, UnicodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ArenaError(f"--host {host}: not an address this machine can listen on ({why})") from None


def free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
