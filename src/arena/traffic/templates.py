"""Requests (traffic.logs.Entry) -> request templates: a request mix (arena.mix's format) whose
weights are the log's counts. Pure.

A path's numeric segments become ``{name:lo..hi}`` over the range the log shows (named after the
segment before them: ``/posts/{post_id:1..9999}``), and so do a query's numeric values
(``?page={page:1..40}``); opaque tokens become arena-load's random tokens of their shape
(``{file_id:uuid}``, ``{commit_id:hex:40}``, ``{key:token:22}`` for base64url); requests that
differ only there are one template. What is neither stays as it is in the path; in a query, a
value that is neither is user data (a search, an e-mail): it is not written unless
``keep_values``, and the parameter is then dropped from the template (the summary names it). A
token longer than arena-load draws (mix.MAX_TOKEN) leaves its request out, counted. A HAR's
request headers go with its template, less cookies, credentials and where it was recorded
(DROPPED_HEADERS), and its JSON or form body as a template of the same shape (body_shape).

Left out by default: static assets (by extension, or under /assets, /static, /packs), health
checks, and templates that only ever answered 5xx. The templates covering ``coverage`` of the
requests kept are written, the most frequent first; the rest are counted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import parse_qsl, quote

from arena.mix import MAX_TOKEN
from arena.traffic.logs import Entry

STATIC = re.compile(r"^/(assets|static|packs|public|favicon)(/|$)|\.(css|js|mjs|map|png|jpe?g|gif|svg|ico|webp|avif|"
                    r"woff2?|ttf|otf|eot|txt|xml|json|mp4|webm|mp3|pdf|zip|gz)$", re.IGNORECASE)
HEALTH = re.compile(r"^/(health|healthz|healthcheck|health_check|livez|readyz|ready|alive|up|ping|status|_health)/?$",
                    re.IGNORECASE)
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
HEX_TOKEN = re.compile(r"^[0-9a-fA-F]{16,}$")
WORD_TOKEN = re.compile(r"^(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}={0,2}$")
NUMBER_FIELD = "#"  # a field's kind in a template's key: a number drawn from a range, else a token's mix kind
BODY_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*):([#~])\}")
# request headers never carried into a mix: credentials, the session, the connection's own, and where
# the recording was made (the mix is sent to another host)
DROPPED_HEADERS = frozenset(("cookie", "authorization", "proxy-authorization", "x-csrf-token", "x-xsrf-token",
                             "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te",
                             "upgrade", "referer", "origin"))
NUMBER = re.compile(r"^[0-9]{1,15}$")
DEFAULT_COVERAGE = 0.99


def token(text: str) -> str | None:
    """The mix's token kind that draws values of ``text``'s shape ("uuid", "hex:40", "token:22"),
    "" for a token too long to draw, None where ``text`` is no opaque token."""
    if len(text) < 16:
        return None
    if UUID.match(text):
        return "uuid"
    kind = "hex" if HEX_TOKEN.match(text) else "token" if WORD_TOKEN.match(text) else None
    if kind is None:
        return None
    length = len(text.rstrip("="))
    return f"{kind}:{length}" if length <= MAX_TOKEN else ""


Field = tuple[str, str]  # (kind: NUMBER_FIELD or a token's, name)


@dataclass
class Template:
    method: str
    pieces: tuple[str | Field, ...]  # the path's segments: text, or a field
    params: tuple[str | tuple[str, str, str], ...]  # the query's: "key=value" text, or (key, kind, name)
    count: int = 0
    statuses: Counter = field(default_factory=Counter)
    low: dict[str, int] = field(default_factory=dict)
    high: dict[str, int] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)  # query parameters whose values are user data
    headers: tuple[tuple[str, str], ...] = ()  # a HAR's, less cookies, credentials and the connection's own
    body: str | None = None  # a HAR's body, its values as fields: "{name:#}" a number drawn, "{name:~}" a text
    lengths: dict[str, list[int]] = field(default_factory=dict)  # each text field's lengths: [sum, count]

    def add(self, numbers: dict[str, int], status: int | None, lengths: dict[str, int] | None = None) -> None:
        self.count += 1
        for name, n in (lengths or {}).items():
            seen = self.lengths.setdefault(name, [0, 0])
            seen[0] += n
            seen[1] += 1
        if status is not None:
            self.statuses[status] += 1
        for name, value in numbers.items():
            if value < self.low.get(name, value + 1):
                self.low[name] = value
            if value > self.high.get(name, -1):
                self.high[name] = value

    @property
    def path(self) -> str:
        """The template as a mix's path: ``/posts/{post_id:1..9999}?page={page:1..40}``."""
        def draw(kind: str, name: str) -> str:
            return f"{{{name}:{self.low[name]}..{self.high[name]}}}" if kind == NUMBER_FIELD else f"{{{name}:{kind}}}"

        path = "/".join(p if isinstance(p, str) else draw(*p) for p in self.pieces) or "/"
        query = [p if isinstance(p, str) else f"{p[0]}={draw(p[1], p[2])}" for p in self.params]
        return path + ("?" + "&".join(query) if query else "")

    @property
    def body_text(self) -> str | None:
        """The body as a mix's: each number's field with the range seen."""
        if self.body is None:
            return None
        def field_text(m: re.Match) -> str:
            name = m.group(1)
            if m.group(2) == "#":
                return f"{{{name}:{self.low[name]}..{self.high[name]}}}"
            total, n = self.lengths[name]
            return f"{{{name}:token:{min(MAX_TOKEN, max(1, round(total / n)))}}}"  # their mean length

        return BODY_FIELD.sub(field_text, self.body)

    @property
    def failed_only(self) -> bool:
        return bool(self.statuses) and all(s >= 500 for s in self.statuses)


@dataclass
class Built:
    """The templates, and what the log had that they leave out."""

    kept: list[Template]
    beyond: list[Template]  # past the coverage: counted, not written
    read: int  # requests read (lines that parsed)
    static: int = 0
    health: int = 0
    excluded: int = 0  # by --exclude, or not matching --include
    tokens: int = 0  # with a token longer than arena-load draws
    failed_only: int = 0  # requests of templates that only answered 5xx
    dropped_params: Counter = field(default_factory=Counter)  # query parameters left out, by name
    bodies_dropped: int = 0  # request bodies left out: neither JSON nor a form (unless keep_values)

    @property
    def written(self) -> int:
        return sum(t.count for t in self.kept)


@lru_cache(maxsize=4096)
def _base(before: str) -> str:
    """A field's name from the segment before it: posts -> post_id, categories -> category_id."""
    word = _identifier(before, "")
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    return f"{word}_id" if word else "id"


def _unique(base: str, taken: set[str]) -> str:
    """``base``, or base2, base3, ... where a request has it already; now taken."""
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name


def _identifier(word: str, default: str) -> str:
    """``word`` as a field's name: its letters, digits and underscores, lower case, never starting
    with a digit; ``default`` where it has none of them."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", word).strip("_").lower()
    if not ident:
        return default
    return "v" + ident if ident[0].isdigit() else ident


def shape(method: str, target: str, keep_values: bool) -> tuple[tuple, dict[str, int], set[str]] | None:
    """(the template's key, the numbers drawn by name, the query parameters dropped); None where the
    target holds a token longer than arena-load draws."""
    path, _, query = target.partition("?")
    path = re.sub(r"^[a-z]+://[^/]*", "", path.partition("#")[0])  # a proxy's absolute target
    pieces: list[str | Field] = []
    numbers, taken = {}, set()
    before = ""
    for seg in path.split("/"):
        if seg.isdigit() and seg.isascii() and len(seg) <= 15:  # NUMBER, without a regular expression
            name = _unique(_base(before), taken)
            numbers[name] = int(seg)
            pieces.append((NUMBER_FIELD, name))
        elif (kind := token(seg)) is not None:
            if not kind:
                return None
            pieces.append((kind, _unique(_base(before), taken)))
        else:
            pieces.append(seg)
            before = seg
    params: list[str | tuple[str, str, str]] = []
    dropped = set()
    for key, value in parse_qsl(query, keep_blank_values=True) if query else ():
        ident = _identifier(key, "q")
        kind = NUMBER_FIELD if NUMBER.match(value) else token(value)
        if kind == "":
            return None
        if kind is not None and ident not in taken:
            taken.add(ident)
            if kind == NUMBER_FIELD:
                numbers[ident] = int(value)
            params.append((quote(key, safe="[]"), kind, ident))
        elif keep_values or value == "":
            params.append(f"{quote(key, safe='[]')}={quote(value, safe='')}")
        else:
            dropped.add(key)
    return (method, tuple(pieces), tuple(params)), numbers, dropped


def body_shape(body: str, mime: str | None, numbers: dict[str, int], lengths: dict[str, int], taken: set[str],
               keep_values: bool) -> str | None:
    """A request body as a template: JSON or a form, each number a field drawn from the range seen,
    each token one of its kind, and each other text a random token of the texts' mean length
    (``lengths``: this one's, by field) unless ``keep_values`` (the shape of what users sent, not
    what they sent); None for any other body, unless ``keep_values``."""
    kind = (mime or "").split(";")[0].strip().lower()

    def field_name(key: str) -> str:
        return _unique(_identifier(key, "v"), taken)

    def text(value: str, key: str) -> str:
        shape = token(value)
        if shape:
            return f"{{{field_name(key)}:{shape}}}"
        if keep_values or not value:
            return value
        name = field_name(key)
        lengths[name] = len(value)
        return f"{{{name}:~}}"

    def walk(value, key: str) -> str:
        if isinstance(value, bool) or value is None or isinstance(value, float):
            return json.dumps(value)
        if isinstance(value, int):
            if keep_values or not 0 <= value <= 10**15:
                return json.dumps(value)
            name = field_name(key)
            numbers[name] = value
            return f"{{{name}:#}}"
        if isinstance(value, str):
            return json.dumps(text(value, key)) if "{" not in value else json.dumps(value if keep_values else "")
        if isinstance(value, list):
            return "[" + ",".join(walk(v, key) for v in value) + "]"
        return "{" + ",".join(f"{json.dumps(k)}:{walk(v, k)}" for k, v in value.items()) + "}"

    if kind == "application/json" or kind.endswith("+json"):
        try:
            return walk(json.loads(body), "v")
        except ValueError:
            return None
    if kind == "application/x-www-form-urlencoded":
        out = []
        for key, value in parse_qsl(body, keep_blank_values=True):
            if NUMBER.match(value) and not keep_values:
                name = field_name(key)
                numbers[name] = int(value)
                out.append(f"{quote(key, safe='[]')}={{{name}:#}}")
            else:
                out.append(f"{quote(key, safe='[]')}={quote(text(value, key), safe='{}:')}")
        return "&".join(out)
    return body if keep_values else None


def build(entries: list[Entry], *, include: re.Pattern | None = None, exclude: re.Pattern | None = None,
          coverage: float = DEFAULT_COVERAGE, keep_values: bool = False, all_paths: bool = False) -> Built:
    """The log's templates (``all_paths``: static assets and health checks kept too)."""
    templates: dict[tuple, Template] = {}
    out = Built([], [], len(entries))
    static, health = STATIC.search, HEALTH.match
    screen = not all_paths and include is None
    for e in entries:
        if include is not None and not include.search(e.target) or exclude is not None and exclude.search(e.target):
            out.excluded += 1
            continue
        if screen:
            path = e.target.partition("?")[0]
            if static(path):
                out.static += 1
                continue
            if health(path):
                out.health += 1
                continue
        shaped = shape(e.method, e.target, keep_values)
        if shaped is None:
            out.tokens += 1
            continue
        key, numbers, dropped = shaped
        headers = tuple((k, v) for k, v in e.headers if not k.startswith(":") and k.lower() not in DROPPED_HEADERS)
        body, lengths = None, {}
        if e.body and e.method not in ("GET", "HEAD"):
            taken = {p[-1] for p in (*key[1], *key[2]) if isinstance(p, tuple)}
            body = body_shape(e.body, e.mime, numbers, lengths, taken, keep_values)
            if body is None:
                out.bodies_dropped += 1
        key = (*key, headers, body)
        t = templates.get(key)
        if t is None:
            t = templates[key] = Template(key[0], key[1], key[2], headers=headers, body=body)
        t.add(numbers, e.status, lengths)
        t.dropped |= dropped
        for name in dropped:
            out.dropped_params[name] += 1
    ranked = sorted(templates.values(), key=lambda t: (-t.count, t.method, t.path))
    failing = [t for t in ranked if t.failed_only]
    out.failed_only = sum(t.count for t in failing)
    ranked = [t for t in ranked if not t.failed_only]
    total, running = sum(t.count for t in ranked), 0
    for t in ranked:
        (out.kept if running < coverage * total else out.beyond).append(t)
        running += t.count
    return out


def mix_toml(built: Built, source: str) -> str:
    """The templates as a mix file (arena.mix), each with its share and statuses in a comment."""
    total = built.written
    lines = [f"# A request mix from {source}: {len(built.kept)} templates covering {total:,} requests",
             "# (arena mix from-log). Weights are the log's counts; ranges are the values it shows.", ""]
    for t in built.kept:
        seen = ", ".join(f"{s} ({100 * n / t.count:.1f}%)" for s, n in sorted(t.statuses.items()))
        lines += ["[[requests]]",
                  f"# {100 * t.count / total:.1f}% of the requests" + (f"; statuses: {seen}" if seen else ""),
                  *([f"# query values left out (user data): {', '.join(sorted(t.dropped))}"] if t.dropped else []),
                  f"weight = {t.count}", f"method = {json.dumps(t.method)}", f"path = {json.dumps(t.path)}",
                  *([f"headers = {{ {', '.join(f'{json.dumps(k)} = {json.dumps(v)}' for k, v in t.headers)} }}"]
                    if t.headers else []),
                  *([f"body = {json.dumps(t.body_text)}"] if t.body is not None else []), ""]
    return "\n".join(lines)
