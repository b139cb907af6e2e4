"""Access log lines -> requests (:class:`Entry`): nginx's and Apache's combined and common formats,
JSON lines (nginx ``log_format ... escape=json``, Rails' lograge; keys named by ``fields``) and
vegeta's target format. Pure: lines in, entries out; a line that does not parse is a
:class:`Skipped` with its number and why, never its text (a log holds its users' data).

A regular expression (one for both of nginx's and Apache's formats: their request, status and
time come first), not a log-format library: the libraries that read Apache's LogFormat directives
make an object with a parsed datetime of every line, and a capacity test's log has millions of
them (here 250,000 lines a second: benches/log_mix.py); only the first and the last time of each
file are parsed, for the span.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import NamedTuple

import orjson

from arena.mix import METHODS as MIX_METHODS

FORMATS = ("combined", "common", "jsonl", "vegeta", "har")
FIELDS = ("method", "path", "status", "time", "request")  # what --fields maps to a JSON line's keys
# a JSON line's keys tried where --fields names none (nginx escape=json, lograge, Caddy, Traefik)
DEFAULT_KEYS = {
    "method": ("method", "request_method", "verb", "RequestMethod"),
    "path": ("path", "request_uri", "uri", "url", "RequestPath"),
    "status": ("status", "status_code", "DownstreamStatus"),
    "time": ("time", "timestamp", "@timestamp", "time_local", "time_iso8601", "ts", "StartUTC"),
    "request": ("request",),  # "GET /path HTTP/1.1", where method and path are not their own keys
}
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
# what a request of a mix can be (arena.mix's methods): a log's other requests (a proxy's CONNECT,
# OPTIONS *, WebDAV's PROPFIND) are skipped, each with its line
UNSENT = "not a method a mix sends (" + ", ".join(MIX_METHODS) + ")"

# host ident user [time] "METHOD target PROTOCOL" status bytes, then (combined) "referer" "agent" and
# whatever a log_format adds after them: read alike (the request is all that is kept); which of the
# two a log is, is told by its first lines (detect)
REQUEST = re.compile(r'\S+ \S+ (?:\S+|"[^"]*") \[([^\]]+)\] "([A-Z]+) (\S+)(?: [^"]*)?" (\d{3}) (?:\d+|-)')
COMBINED_TAIL = re.compile(r' "(?:[^"\\]|\\.)*" "(?:[^"\\]|\\.)*"')
VEGETA = re.compile(r"([A-Z]+) (\S+)\s*$")
CLF_TIME = "%d/%b/%Y:%H:%M:%S %z"
ABSOLUTE = re.compile(r"^[a-z]+://")  # a proxy's absolute target


class Entry(NamedTuple):  # a tuple: made once per line of a log, at 200,000 lines a second
    method: str
    target: str  # the path with its query, as the log has it
    status: int | None  # None: the format has none (vegeta's targets)
    time: str | None  # as the log writes it (only a file's first and last are parsed: seconds)
    headers: tuple[tuple[str, str], ...] = ()  # a HAR's request headers
    body: str | None = None  # a HAR's request body
    mime: str | None = None  # its type


class Skipped(NamedTuple):
    line: int  # 1-based, in its file
    why: str
    parsed: bool = False  # a line of the format, but a request no mix could send (sendable)


def detect(lines: list[str]) -> str | None:
    """The format of a log's first lines (those not blank): the one most of them parse as."""
    sample = [x for x in lines if x.strip()][:20]
    if not sample:
        return None
    if sample[0].lstrip().startswith("{") and '"log"' in "".join(sample)[:2000]:
        return "har"
    best, most = None, 0
    for fmt in ("common", "jsonl", "vegeta"):
        parsed = sum(isinstance(e, Entry) or e.parsed for e in read(sample, fmt))
        if parsed > most:
            best, most = fmt, parsed
    if best == "common":
        tails = [m.string[m.end():] for m in map(REQUEST.match, sample) if m]
        if sum(bool(COMBINED_TAIL.match(t)) for t in tails) * 2 >= len(tails):
            best = "combined"
    return best if most * 2 >= len(sample) else None


def read(lines: Iterable[str], fmt: str, fields: dict[str, str] | None = None) -> Iterator[Entry | Skipped]:
    """Each line of a log in ``fmt`` (FORMATS) as an Entry, or a Skipped with its line number."""
    if fmt == "har":
        yield from _har(lines)
    elif fmt == "jsonl":
        yield from _jsonl(lines, fields or {})
    elif fmt == "vegeta":
        yield from _vegeta(lines)
    else:
        match, why = REQUEST.match, f"not the {fmt} log format"
        for n, line in enumerate(lines, 1):
            m = match(line)
            if m is None:
                if line.strip():
                    yield Skipped(n, why)
                continue
            time, method, target, status = m.groups()
            yield sendable(n, Entry(method, target, int(status), time))


def sendable(n: int, e: Entry) -> Entry | Skipped:
    """``e``, or a Skipped (line ``n``) where no mix could send it: a method a mix does not send, a
    target that is no path (``host:443``, ``*``)."""
    if e.method not in MIX_METHODS:
        return Skipped(n, f"a {e.method[:16]} request: {UNSENT}", True)
    if not e.target.startswith("/") and not ABSOLUTE.match(e.target):
        return Skipped(n, "its target is no path (neither /... nor http://host/...)", True)
    return e


def _jsonl(lines: Iterable[str], fields: dict[str, str]) -> Iterator[Entry | Skipped]:
    keys = {name: ((fields[name],) if name in fields else DEFAULT_KEYS[name]) for name in DEFAULT_KEYS}

    def get(doc: dict, name: str):
        for k in keys[name]:
            if k in doc:
                return doc[k]
        return None

    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            yield Skipped(n, "not a JSON object")
            continue
        if not isinstance(doc, dict):
            yield Skipped(n, "not a JSON object")
            continue
        method, path = get(doc, "method"), get(doc, "path")
        if (method is None or path is None) and isinstance(request := get(doc, "request"), str):
            parts = request.split(" ")
            if len(parts) >= 2:
                method, path = method or parts[0], path or parts[1]
        if not isinstance(method, str) or not isinstance(path, str) or not path:
            missing = "method" if not isinstance(method, str) else "path"
            yield Skipped(n, f"no {missing} (keys tried: {', '.join(keys[missing])}; name it with --fields)")
            continue
        status = get(doc, "status")
        try:
            status = int(status) if status is not None else None
        except (TypeError, ValueError):
            yield Skipped(n, "its status is not a number")
            continue
        time = get(doc, "time")
        yield sendable(n, Entry(method.upper(), path, status, None if time is None else str(time)))


def _har(lines: Iterable[str]) -> Iterator[Entry | Skipped]:
    """HAR 1.2 (a browser's devtools, Playwright, Gatling's recorder): each entry's request with its
    headers and body, its response's status and its start."""
    text = "\n".join(lines)
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # orjson does not say where; the standard library's reader does
            json.loads(text)
        except json.JSONDecodeError as e:
            cut = " (a HAR cut short?)" if e.pos >= len(text.rstrip()) else ""
            yield Skipped(e.lineno, f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}{cut}")
            return
        yield Skipped(1, "not valid JSON")
        return
    try:
        entries = doc["log"]["entries"]
    except (KeyError, TypeError):
        yield Skipped(1, "not a HAR document ({\"log\": {\"entries\": [...]}})")
        return
    for n, e in enumerate(entries if isinstance(entries, list) else [], 1):
        try:
            req = e["request"]
            method, url = req["method"].upper(), req["url"]
        except (KeyError, TypeError, AttributeError):
            yield Skipped(n, "an entry without request.method and request.url")
            continue
        target = re.sub(r"^[a-z]+://[^/?#]*", "", url) or "/"
        status = (e.get("response") or {}).get("status")
        post = req.get("postData") or {}
        headers = tuple((h["name"], h["value"]) for h in req.get("headers") or ()
                        if isinstance(h, dict) and isinstance(h.get("name"), str) and isinstance(h.get("value"), str))
        body = post.get("text")
        if body is None and post.get("params"):
            body = "&".join(f"{p.get('name', '')}={p.get('value', '')}" for p in post["params"])
        yield sendable(n, Entry(method, target.partition("#")[0],
                                int(status) if isinstance(status, int) and status > 0 else None,
                                e.get("startedDateTime"), headers, body or None, post.get("mimeType")))


def _vegeta(lines: Iterable[str]) -> Iterator[Entry | Skipped]:
    """vegeta's targets: ``METHOD URL`` lines, each followed by its header lines and an optional
    ``@body-file`` line, targets apart by blank lines."""
    inside = False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            inside = False
            continue
        m = VEGETA.match(line)
        if m and m.group(1) in METHODS:
            url = m.group(2)
            target = re.sub(r"^[a-z]+://[^/?#]*", "", url) or "/"
            yield sendable(n, Entry(m.group(1), target, None, None))
            inside = True
        elif inside and (line.startswith("@") or ":" in line):
            continue  # the target's header or body file
        else:
            yield Skipped(n, "not a vegeta target (METHOD URL)")


def seconds(time: str | None) -> float | None:
    """A log's time as seconds since the epoch: the common log format's ``10/Oct/2000:13:55:36
    -0700``, ISO 8601, or a number of seconds (or milliseconds); None where it is none of them."""
    if time is None:
        return None
    for parse in (lambda t: datetime.strptime(t, CLF_TIME), lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))):
        try:
            return parse(time).timestamp()
        except ValueError:
            pass
    try:
        value = float(time)
    except ValueError:
        return None
    return value / 1000 if value > 1e11 else value


def arrival_times(entries: Iterable[Entry]) -> list[float | None]:
    """Each entry's time in seconds (seconds()), each distinct text parsed once: a log's lines share
    their seconds by the hundred."""
    known: dict[str | None, float | None] = {}
    out = []
    for e in entries:
        if e.time not in known:
            known[e.time] = seconds(e.time)
        out.append(known[e.time])
    return out
