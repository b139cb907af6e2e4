"""Request mix files: the weighted requests of a real app's workload (reads and writes mixed), in
TOML or JSON, checked here and handed to arena-load (its ``--mix``), which draws each request from
the weights and each templated value per send, both from the run's seed.

    [[requests]]
    name = "show"                      # optional: how the request is called in errors
    weight = 6                         # relative frequency (default 1; 0 leaves it out)
    method = "GET"                     # default GET
    path = "/posts/{id:1..10000}"      # {name:lo..hi} draws a whole number; {name} repeats it
                                       # ({name:uuid}, {name:hex:N}, {name:token:N}: a random token)
    headers = { Accept = "application/json" }

    [[requests]]
    method = "POST"
    path = "/posts"
    form = { title = "Post {n:1..1000000}", body = "Text of {n}" }   # or json = {...}, or body = "..."

A session is what one virtual user does in order: each user draws a session by weight (plain
requests count as sessions of one step), keeps its own cookie jar through it (Set-Cookie kept, sent
back and expired as a browser does), and captures values from answers that later steps use as
``{name}`` (percent-encoded in a path, query or form, escaped in JSON, as it is in a header):

    [[sessions]]
    name = "new post"                  # how its errors are named
    weight = 1                         # against the other sessions' and requests' weights
    think = "500ms"                    # optional: between its steps (default: the run's think time)
    [[sessions.steps]]
    path = "/posts/new"
    capture = [{ name = "csrf", regex = 'name="csrfmiddlewaretoken" value="([^"]+)"' }]
    [[sessions.steps]]
    method = "POST"
    path = "/posts/new"
    form = { csrfmiddlewaretoken = "{csrf}", title = "Post {n:1..1000}" }
    capture = [{ name = "post", header = "Location", regex = '/posts/([0-9]+)' }]  # or json = "/id"
    [[sessions.steps]]
    path = "/posts/{post}"

A step whose capture is not found is an error of its own class (capture) and ends its session. In an
open model the rate is of sessions started: a session's arrival sends its first step.

A JSON file holds the same: ``{"requests": [...], "sessions": [...]}`` (or the bare list of requests,
arena-load's own format).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from arena.errors import ArenaError

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
REQUEST_KEYS = {"name", "weight", "method", "path", "headers", "body", "form", "json"}
STEP_KEYS = REQUEST_KEYS - {"weight"} | {"capture"}
SESSION_KEYS = {"name", "weight", "think", "steps"}
CAPTURE_KEYS = {"name", "regex", "json", "header"}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# what Python's re reads and the regex crate refuses: look-around and back-references
NOT_RUST = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=")
# arena-load's template grammar (crates/arena-load/src/http.rs, parse_pieces): the same limits;
# groups: name, lo, hi (a range), kind and length (hex or token: N characters), uuid
FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::(?:([0-9]{1,19})\.\.([0-9]{1,19})|(hex|token):([0-9]{1,2})|(uuid)))?\}")
MAX_FIELDS = 16
MAX_VALUE = 10**15
MAX_TOKEN = 64
LOWEST_TOKEN = {"hex": "0", "token": "A", "uuid": "00000000-0000-4000-8000-000000000000"}
MAX_REQUESTS = 1000
MAX_STEPS = 100  # in one session (arena-load's cli.rs MAX_STEPS)


@dataclass(frozen=True)
class Capture:
    """A value a session's step takes from its answer: by ``regex`` (its first group) or by the JSON
    pointer ``json``, from the body or, with ``header``, from that header's value."""
    name: str
    regex: str | None = None
    json: str | None = None
    header: str | None = None

    def arena_load(self) -> dict[str, str]:
        return {k: v for k, v in (("name", self.name), ("regex", self.regex), ("json", self.json),
                                  ("header", self.header)) if v is not None}


@dataclass(frozen=True)
class MixRequest:
    weight: int
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: str
    name: str
    captures: tuple[Capture, ...] = ()

    def arena_load(self) -> dict[str, Any]:
        out = {"weight": self.weight, "method": self.method, "path": self.path, "headers": dict(self.headers),
               "body": self.body}
        if self.captures:
            out["capture"] = [c.arena_load() for c in self.captures]
        return out


@dataclass(frozen=True)
class Session:
    name: str
    weight: int
    think: str | None
    steps: tuple[MixRequest, ...]


@dataclass(frozen=True)
class Mix:
    file: str
    requests: tuple[MixRequest, ...]
    sessions: tuple[Session, ...] = ()

    def first_get(self) -> str | None:
        """The path of the first GET the mix sends, each drawn value at its lowest (a token all zeros
        or As; a repeated field as the value it repeats); None where it sends no GET."""
        firsts = [s.steps[0] for s in self.sessions if s.weight > 0]
        for r in (*self.requests, *firsts):
            if r.weight > 0 and r.method == "GET":
                drawn: dict[str, str] = {}

                def low(m: re.Match) -> str:
                    if m.group(2) is not None:
                        drawn.setdefault(m.group(1), m.group(2))
                    elif m.group(4) is not None:
                        drawn.setdefault(m.group(1), LOWEST_TOKEN[m.group(4)] * int(m.group(5)))
                    elif m.group(6) is not None:
                        drawn.setdefault(m.group(1), LOWEST_TOKEN["uuid"])
                    return drawn.get(m.group(1), "1")

                return FIELD.sub(low, r.path)
        return None

    def arena_load(self) -> list[dict[str, Any]] | dict[str, Any]:
        """The mix as arena-load's ``--mix`` JSON reads it (a plain mix: the bare list)."""
        requests = [r.arena_load() for r in self.requests if r.weight > 0]
        if not self.sessions:
            return requests
        sessions = [{"name": s.name, "weight": s.weight, "steps": [r.arena_load() for r in s.steps]}
                    | ({"think": s.think} if s.think is not None else {}) for s in self.sessions if s.weight > 0]
        return {"requests": requests, "sessions": sessions}

    @property
    def methods(self) -> tuple[str, ...]:
        sent = [r for r in self.requests if r.weight > 0] + [r for s in self.sessions if s.weight > 0 for r in s.steps]
        return tuple(dict.fromkeys(r.method for r in sent))


def load_mix(path: str | Path, flag: str = "--mix") -> Mix:
    """Read and check a mix file; every refusal is one line naming the file, the request and the key."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArenaError(f"{flag} {file}: no such mix file") from None
    except (OSError, ValueError) as e:  # ValueError: undecodable, or a NUL byte in the name
        raise ArenaError(f"{flag} {file}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    try:
        data = json.loads(text) if file.endswith(".json") else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        kind = "JSON" if file.endswith(".json") else "TOML"
        raise ArenaError(f"{file}: not valid {kind}: {str(e).splitlines()[0]}") from None
    return parse_mix(data, file)


def parse_mix(data: Any, file: str) -> Mix:
    raw = data.get("requests", []) if isinstance(data, dict) else data
    if isinstance(data, dict) and set(data) - {"requests", "sessions"}:
        key = sorted(set(data) - {"requests", "sessions"})[0]
        raise ArenaError(f"{file}: {key}: unknown key (a mix file holds [[requests]] and [[sessions]])")
    raw_sessions = data.get("sessions", []) if isinstance(data, dict) else []
    if not isinstance(raw_sessions, list) or len(raw_sessions) > MAX_REQUESTS \
            or not all(isinstance(s, dict) for s in raw_sessions):
        raise ArenaError(f"{file}: sessions: must be up to {MAX_REQUESTS} [[sessions]] tables")
    if not isinstance(raw, list) or not (raw or raw_sessions) or len(raw) > MAX_REQUESTS \
            or not all(isinstance(r, dict) for r in raw):
        raise ArenaError(f"{file}: requests: must be 1 to {MAX_REQUESTS} [[requests]] tables (or give [[sessions]])")
    requests = tuple(_request(r, f"{file}: requests[{i}].") for i, r in enumerate(raw))
    sessions = tuple(_session(s, f"{file}: sessions[{i}].") for i, s in enumerate(raw_sessions))
    if not any(r.weight > 0 for r in (*requests, *sessions)):
        raise ArenaError(f"{file}: requests: at least one request or session needs a weight above 0")
    return Mix(file, requests, sessions)


def _fail(where: str, key: str, value: Any, allowed: str) -> ArenaError:
    shown = json.dumps(value, ensure_ascii=True) if isinstance(value, (str, int, float, list, dict, bool)) else repr(value)
    return ArenaError(f"{where}{key} = {shown[:120]}: {allowed}")


def _weight(r: dict[str, Any], where: str) -> int:
    weight = r.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 1_000_000:
        raise _fail(where, "weight", weight, "must be a whole number from 0 to 1000000")
    return weight


def _session(s: dict[str, Any], where: str) -> Session:
    for key in s:
        if key not in SESSION_KEYS:
            raise _fail(where, key, s[key], f"unknown key (allowed: {', '.join(sorted(SESSION_KEYS))})")
    name = s.get("name")
    if name is None:
        raise ArenaError(f"{where}name: missing: a session needs a name, by which its errors are told")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise _fail(where, "name", name, "a session needs a name (up to 100 characters): its errors are named by it")
    think = s.get("think")
    if think is not None and (not isinstance(think, str) or not re.fullmatch(r"[0-9]+(\.[0-9]+)?(us|ms|s|m|h)?", think)):
        raise _fail(where, "think", think, "must be a duration such as 500ms or 2s")
    steps = s.get("steps")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS or not all(isinstance(t, dict) for t in steps):
        raise _fail(where, "steps", steps, f"must be 1 to {MAX_STEPS} [[sessions.steps]] tables")
    parsed = tuple(_request(t, f"{where}steps[{k}].", STEP_KEYS) for k, t in enumerate(steps))
    return Session(name, _weight(s, where), think, parsed)


def _captures(raw: Any, where: str) -> tuple[Capture, ...]:
    if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
        raise _fail(where, "capture", raw, "must be a list of tables such as { name = \"csrf\", regex = '...' }")
    out = []
    for c in raw:
        for key in c:
            if key not in CAPTURE_KEYS:
                raise _fail(where, "capture", c, f"{key}: unknown key (allowed: {', '.join(sorted(CAPTURE_KEYS))})")
        name, regex, pointer, header = (c.get(k) for k in ("name", "regex", "json", "header"))
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise _fail(where, "capture", c, "name: must be a name such as csrf or post_id")
        if any(v is not None and not isinstance(v, str) for v in (regex, pointer, header)):
            raise _fail(where, "capture", c, "regex, json and header are strings")
        if regex is not None and pointer is not None:
            raise _fail(where, "capture", c, f"{name}: give regex or json, not both")
        if regex is None and pointer is None and header is None:
            raise _fail(where, "capture", c, f"{name}: give regex or json (or header, for a header's value)")
        if pointer is not None and (header is not None or not (pointer == "" or pointer.startswith("/"))):
            raise _fail(where, "capture", c, f"{name}: json is a JSON pointer into the body, such as /id")
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as e:
                raise _fail(where, "capture", c, f"{name}: regex does not compile ({e})") from None
            if NOT_RUST.search(regex):
                raise _fail(where, "capture", c, f"{name}: arena-load's regexes (Rust's regex crate) have no "
                                                 "look-around or back-reference: capture the value in a group")
        out.append(Capture(name, regex, pointer, header))
    return tuple(out)


def _request(r: dict[str, Any], where: str, keys: set[str] = REQUEST_KEYS) -> MixRequest:
    for key in r:
        if key not in keys:
            raise _fail(where, key, r[key], f"unknown key (allowed: {', '.join(sorted(keys))})")
    weight = _weight(r, where)
    method = r.get("method", "GET")
    if method not in METHODS:
        raise _fail(where, "method", method, f"must be one of {', '.join(METHODS)}")
    path = r.get("path")
    if not isinstance(path, str) or not path.startswith("/") or not re.fullmatch(r"[\x21-\x7e]+", path):
        raise _fail(where, "path", path, "must start with / and be printable ASCII without spaces (percent-encode "
                                         "the rest)")
    headers = r.get("headers", {})
    if not isinstance(headers, dict) or not all(
            isinstance(k, str) and re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", k) and isinstance(v, str)
            and not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", v) for k, v in headers.items()):
        raise _fail(where, "headers", headers, "must be a table of header names and string values without "
                                               "control characters")
    bodies = [k for k in ("body", "form", "json") if k in r]
    if len(bodies) > 1:
        raise _fail(where, bodies[1], r[bodies[1]], f"give one of body, form or json (this request has {bodies[0]})")
    body, content_type = "", None
    if "body" in r:
        if not isinstance(r["body"], str):
            raise _fail(where, "body", r["body"], "must be a string (or give form or json)")
        body = r["body"]
    elif "form" in r:
        form = r["form"]
        if not isinstance(form, dict) or not all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                 for v in form.values()):
            raise _fail(where, "form", form, "must be a table of field names and string or number values")
        # templates stay whole: their braces are not percent-encoded, the values drawn are digits
        body = "&".join(f"{quote(str(k), safe='')}={quote(str(v), safe='{}:.')}" for k, v in form.items())
        content_type = "application/x-www-form-urlencoded"
    elif "json" in r:
        body = json.dumps(r["json"], separators=(",", ":"))
        content_type = "application/json"
    if content_type and not any(k.lower() == "content-type" for k in headers):
        headers = {**headers, "Content-Type": content_type}
    if body and method in ("GET", "HEAD"):
        raise _fail(where, "method", method, "a request with a body is POST, PUT, PATCH or DELETE")
    _check_fields(where, path, body)
    name = r.get("name", f"{method} {path}")
    if not isinstance(name, str):
        raise _fail(where, "name", name, "must be a string")
    captures = _captures(r["capture"], where) if "capture" in r else ()
    return MixRequest(weight, method, path, tuple(headers.items()), body, name, captures)


# What starts a template: "{name:" anywhere (a drawn value), and in a path any "{" (a brace is not
# a URL's character: there it can only be a template). A JSON body's own braces ('{"a":1}') are text.
RANGE_START = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*:")


def _check_templates(where: str, key: str, text: str) -> None:
    """Each template of ``text`` whole ({name}, {name:lo..hi} with bounds of at most 19 digits,
    {name:uuid}, {name:hex:N}, {name:token:N}), so a mistyped one is refused when the file is read
    instead of being sent as text."""
    starts = [m.start() for m in (re.finditer(r"\{", text) if key == "path" else RANGE_START.finditer(text))]
    for at in starts:
        m = FIELD.match(text, at)
        if m is None:
            shown = text[at:text.find("}", at) + 1] if "}" in text[at:] else text[at:at + 30]
            raise _fail(where, key, text, f"'{shown}' is not a template: {{name}}, {{name:lo..hi}} with whole "
                                          f"numbers lo <= hi <= {MAX_VALUE}, {{name:uuid}}, {{name:hex:N}} or "
                                          f"{{name:token:N}}" + ("" if "}" in text[at:] else " (unclosed)"))


def _check_fields(where: str, path: str, body: str) -> None:
    """The templates of a request's path, then its body, as arena-load reads them."""
    drawn: list[str] = []
    for key, text in (("path", path), ("body", body)):
        _check_templates(where, key, text)
        for m in FIELD.finditer(text):
            name, lo, hi, kind, length = m.group(1, 2, 3, 4, 5)
            if lo is None and kind is None and m.group(6) is None:
                continue  # {name}: a value drawn before, or text
            if kind is not None and not 1 <= int(length) <= MAX_TOKEN:
                raise _fail(where, key, text, f"{m.group(0)}: a token is 1 to {MAX_TOKEN} characters long")
            if lo is not None and (int(lo) > int(hi) or int(hi) > MAX_VALUE):
                raise _fail(where, key, text, f"{m.group(0)}: a range runs from a low to a high whole number, "
                                              f"at most {MAX_VALUE}")
            if name in drawn:
                raise _fail(where, key, text, f"{m.group(0)}: {name} is drawn twice (repeat it as {{{name}}})")
            drawn.append(name)
            if len(drawn) > MAX_FIELDS:
                raise _fail(where, key, text, f"at most {MAX_FIELDS} values drawn per request")
