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

A JSON file holds the same: ``{"requests": [...]}`` (or the bare list, arena-load's own format).
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
# arena-load's template grammar (crates/arena-load/src/http.rs, parse_pieces): the same limits;
# groups: name, lo, hi (a range), kind and length (hex or token: N characters), uuid
FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::(?:([0-9]{1,19})\.\.([0-9]{1,19})|(hex|token):([0-9]{1,2})|(uuid)))?\}")
MAX_FIELDS = 16
MAX_VALUE = 10**15
MAX_TOKEN = 64
LOWEST_TOKEN = {"hex": "0", "token": "A", "uuid": "00000000-0000-4000-8000-000000000000"}
MAX_REQUESTS = 1000


@dataclass(frozen=True)
class MixRequest:
    weight: int
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: str
    name: str


@dataclass(frozen=True)
class Mix:
    file: str
    requests: tuple[MixRequest, ...]

    def first_get(self) -> str | None:
        """The path of the first GET the mix sends, each drawn value at its lowest (a token all zeros
        or As; a repeated field as the value it repeats); None where it sends no GET."""
        for r in self.requests:
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

    def arena_load(self) -> list[dict[str, Any]]:
        """The mix as arena-load's ``--mix`` JSON reads it."""
        return [{"weight": r.weight, "method": r.method, "path": r.path, "headers": dict(r.headers), "body": r.body}
                for r in self.requests if r.weight > 0]

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.method for r in self.requests if r.weight > 0))


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
    raw = data.get("requests") if isinstance(data, dict) else data
    if isinstance(data, dict) and set(data) - {"requests"}:
        key = sorted(set(data) - {"requests"})[0]
        raise ArenaError(f"{file}: {key}: unknown key (a mix file holds [[requests]])")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_REQUESTS or not all(isinstance(r, dict) for r in raw):
        raise ArenaError(f"{file}: requests: must be 1 to {MAX_REQUESTS} [[requests]] tables")
    requests = tuple(_request(r, f"{file}: requests[{i}].") for i, r in enumerate(raw))
    if not any(r.weight > 0 for r in requests):
        raise ArenaError(f"{file}: requests: at least one request needs a weight above 0")
    return Mix(file, requests)


def _fail(where: str, key: str, value: Any, allowed: str) -> ArenaError:
    shown = json.dumps(value, ensure_ascii=True) if isinstance(value, (str, int, float, list, dict, bool)) else repr(value)
    return ArenaError(f"{where}{key} = {shown[:120]}: {allowed}")


def _request(r: dict[str, Any], where: str) -> MixRequest:
    for key in r:
        if key not in REQUEST_KEYS:
            raise _fail(where, key, r[key], f"unknown key (allowed: {', '.join(sorted(REQUEST_KEYS))})")
    weight = r.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 1_000_000:
        raise _fail(where, "weight", weight, "must be a whole number from 0 to 1000000")
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
    return MixRequest(weight, method, path, tuple(headers.items()), body, name)


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
