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

No user data by default (docs/reference/apps.md, "What a mix keeps"): a path segment or a query key
shaped like user data (private: an e-mail address, a phone, card or id number, a JWT) becomes a
random token of its mean length; so does every word at a level of the path that holds more than
PATH_WORDS distinct words under one parent (user names, not routes: ``/users/{user_id:token:6}``;
at the top level, where an app's routes are, more than TOP_WORDS);
a range drawn from fewer than DISTINCT_VALUES distinct numbers is widened to the numbers of their
digits (``code=483921`` seen once: ``{code:100000..999999}``), so no single value can be read back;
a HAR's request headers are kept only where they say what the client accepts and is
(KEPT_HEADERS). ``keep_values`` keeps them all as the log has them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import parse_qsl, quote, unquote

from arena.mix import MAX_TOKEN, MAX_VALUE
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
# ... and of the rest, those kept: what the client accepts and what it is, never who
KEPT_HEADERS = frozenset(("accept", "accept-encoding", "accept-language", "content-type", "user-agent",
                          "x-requested-with", "cache-control", "pragma", "dnt", "upgrade-insecure-requests"))
NUMBER = re.compile(r"^[0-9]{1,15}$")
DEFAULT_COVERAGE = 0.99
TEXT_FIELD = "~"  # a field's kind in a template's key: a random token of the values' mean length
# The privacy rule's two thresholds (docs/reference/apps.md): a range is written as the log shows it
# only when drawn from at least DISTINCT_VALUES distinct numbers; a path level with more than
# PATH_WORDS distinct words under one parent is a parameter (names), not a route's words; at the top
# level, where an app's routes are, more than TOP_WORDS.
DISTINCT_VALUES = 5
PATH_WORDS = 12
TOP_WORDS = 50
EMAIL = re.compile(r"@|%40", re.IGNORECASE)
JWT = re.compile(r"^[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*$")
# a phone, card, account or national id number: digits grouped by separators, or after a +
GROUPED_DIGITS = re.compile(r"^\+?\(?[0-9][0-9 ().+-]*[0-9]$")
ISO_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")  # a route's date (/archive/2024-05-01), kept
KEY_DROPPED = "(a key that is user data)"  # how a query key shaped like user data is counted


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


def private(text: str) -> bool:
    """Whether ``text`` (a path segment, a query key; percent-encoded or not) is shaped like user
    data: an e-mail address, a JWT, a phone, card, account or national id number (seven digits or
    more, grouped by spaces, dashes, dots or brackets, or after a +), or a code of letters and six
    digits or more (QQ123456C); an ISO date is a route's."""
    text = unquote(text)
    if EMAIL.search(text) or JWT.match(text):
        return True
    digits = sum(c.isdigit() for c in text)
    if digits >= 6 and len(text) < 16 and text.isalnum() and not text.isdigit():
        return True
    return not text.isdigit() and GROUPED_DIGITS.match(text) is not None and digits >= 7 and not ISO_DATE.match(text)


def digits_range(lo: int, hi: int) -> tuple[int, int]:
    """The numbers of as many digits as ``lo`` and ``hi`` have: (1000, 9999) for 1234..5678; from 0
    where one digit."""
    return min(MAX_VALUE, 0 if lo < 10 else 10 ** (len(str(lo)) - 1)), min(MAX_VALUE, 10 ** len(str(hi)) - 1)


Field = tuple[str, str]  # (kind: NUMBER_FIELD, TEXT_FIELD or a token's, name)


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
    distinct: dict[str, set[int]] = field(default_factory=dict)  # each number's values, up to DISTINCT_VALUES
    exact: bool = False  # ranges as the log shows them however few their values (keep_values)

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
            seen = self.distinct.setdefault(name, set())
            if len(seen) < DISTINCT_VALUES:
                seen.add(value)

    def absorb(self, other: "Template") -> None:
        """Count ``other``'s requests as this one's (the same template once a level is a field)."""
        self.count += other.count
        self.statuses += other.statuses
        for name in other.low:
            self.low[name] = min(self.low.get(name, other.low[name]), other.low[name])
            self.high[name] = max(self.high.get(name, other.high[name]), other.high[name])
            seen = self.distinct.setdefault(name, set())
            seen |= set(sorted(other.distinct[name])[:DISTINCT_VALUES - len(seen)])
        for name, (total, n) in other.lengths.items():
            mine = self.lengths.setdefault(name, [0, 0])
            mine[0] += total
            mine[1] += n
        self.dropped |= other.dropped

    def range_text(self, name: str) -> str:
        """A number's field: the range the log shows, from DISTINCT_VALUES values or more; else the
        range of their digits (no single value can be read back)."""
        lo, hi = self.low[name], self.high[name]
        if not self.exact and len(self.distinct[name]) < DISTINCT_VALUES:
            lo, hi = digits_range(lo, hi)
        return f"{{{name}:{lo}..{hi}}}"

    def token_text(self, name: str) -> str:
        """A text field: a random token of the values' mean length."""
        total, n = self.lengths[name]
        return f"{{{name}:token:{min(MAX_TOKEN, max(1, round(total / n)))}}}"

    @property
    def path(self) -> str:
        """The template as a mix's path: ``/posts/{post_id:1..9999}?page={page:1..40}``."""
        def draw(kind: str, name: str) -> str:
            return (self.range_text(name) if kind == NUMBER_FIELD else self.token_text(name) if kind == TEXT_FIELD
                    else f"{{{name}:{kind}}}")

        path = "/".join(p if isinstance(p, str) else draw(*p) for p in self.pieces) or "/"
        query = [p if isinstance(p, str) else f"{p[0]}={draw(p[1], p[2])}" for p in self.params]
        return path + ("?" + "&".join(query) if query else "")

    @property
    def body_text(self) -> str | None:
        """The body as a mix's: each number's field with the range seen."""
        if self.body is None:
            return None
        def field_text(m: re.Match) -> str:
            return self.range_text(m.group(1)) if m.group(2) == "#" else self.token_text(m.group(1))

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
    headers_dropped: Counter = field(default_factory=Counter)  # a HAR's request headers left out, by name
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


class Shape(NamedTuple):
    key: tuple  # the template's: (method, path pieces, query params)
    numbers: dict[str, int]  # the numbers drawn, by field
    dropped: set[str]  # the query parameters dropped (KEY_DROPPED for a key that is user data)
    lengths: dict[str, int]  # the text fields' lengths, by field


def shape(method: str, target: str, keep_values: bool) -> Shape | None:
    """A request's template key and its values; None where the target holds a token longer than
    arena-load draws."""
    path, _, query = target.partition("?")
    path = re.sub(r"^[a-z]+://[^/]*", "", path.partition("#")[0])  # a proxy's absolute target
    pieces: list[str | Field] = []
    numbers, taken, lengths = {}, set(), {}
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
        elif not keep_values and private(seg):
            name = _unique(_base(before), taken)
            lengths[name] = len(seg)
            pieces.append((TEXT_FIELD, name))
        else:
            pieces.append(seg)
            before = seg
    params: list[str | tuple[str, str, str]] = []
    dropped = set()
    for key, value in parse_qsl(query, keep_blank_values=True) if query else ():
        if not keep_values and private(key):
            dropped.add(KEY_DROPPED)
            continue
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
    return Shape((method, tuple(pieces), tuple(params)), numbers, dropped, lengths)


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
            if keep_values:
                return json.dumps(value)
            name = field_name(key)
            numbers[name] = min(abs(value), MAX_VALUE)  # a card's 16 digits: one of the largest drawn
            return f"{'-' if value < 0 else ''}{{{name}:#}}"
        if isinstance(value, str):
            return json.dumps(text(value, key)) if "{" not in value else json.dumps(value if keep_values else "")
        if isinstance(value, list):
            return "[" + ",".join(walk(v, key) for v in value) + "]"
        return "{" + ",".join(f"{json.dumps(key_text(k))}:{walk(v, k)}" for k, v in value.items()) + "}"

    def key_text(key: str) -> str:
        if keep_values or not private(key):
            return key
        name = field_name("key")
        lengths[name] = len(key)
        return f"{{{name}:~}}"

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
        key, numbers, dropped, lengths = shaped
        headers, left = _headers(e.headers, keep_values)
        out.headers_dropped.update(left)
        body = None
        if e.body and e.method not in ("GET", "HEAD"):
            taken = {p[-1] for p in (*key[1], *key[2]) if isinstance(p, tuple)}
            body = body_shape(e.body, e.mime, numbers, lengths, taken, keep_values)
            if body is None:
                out.bodies_dropped += 1
        key = (*key, headers, body)
        t = templates.get(key)
        if t is None:
            t = templates[key] = Template(key[0], key[1], key[2], headers=headers, body=body, exact=keep_values)
        t.add(numbers, e.status, lengths)
        t.dropped |= dropped
        for name in dropped:
            out.dropped_params[name] += 1
    merged = list(templates.values()) if keep_values else names_as_fields(list(templates.values()))
    ranked = sorted(merged, key=lambda t: (-t.count, t.method, t.path))
    failing = [t for t in ranked if t.failed_only]
    out.failed_only = sum(t.count for t in failing)
    ranked = [t for t in ranked if not t.failed_only]
    total, running = sum(t.count for t in ranked), 0
    for t in ranked:
        (out.kept if running < coverage * total else out.beyond).append(t)
        running += t.count
    return out


def _headers(given: tuple[tuple[str, str], ...], keep_values: bool) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """A HAR request's headers a template carries (never DROPPED_HEADERS nor HTTP/2's pseudo-headers;
    of the rest, KEPT_HEADERS unless ``keep_values``), and the names of those left out as user data."""
    kept, left = [], []
    for k, v in given:
        name = k.lower()
        if k.startswith(":") or name in DROPPED_HEADERS:
            continue
        if keep_values or name in KEPT_HEADERS:
            kept.append((k, v))
        else:
            left.append(name)
    return tuple(kept), left


def _word_at(t: Template, i: int) -> str | None:
    """The word at level ``i`` of ``t``'s path (None: a field, an empty segment, or no such level)."""
    piece = t.pieces[i] if len(t.pieces) > i else None
    return piece if isinstance(piece, str) and piece else None


def names_as_fields(templates: list[Template]) -> list[Template]:
    """The templates with each path level that holds more than PATH_WORDS distinct words under one
    parent (TOP_WORDS at the top) made a text field (their values user names, not a route's words), from the top level
    down, and those that are then the same template as one."""
    depth = max((len(t.pieces) for t in templates), default=0)
    for i in range(1, depth):
        words: dict[tuple, set[str]] = {}
        for t in templates:
            if (word := _word_at(t, i)) is not None:
                words.setdefault(t.pieces[:i], set()).add(word)
        wide = {parent for parent, w in words.items() if len(w) > (TOP_WORDS if i == 1 else PATH_WORDS)}
        if not wide:
            continue
        merged: dict[tuple, Template] = {}
        for t in templates:
            if t.pieces[:i] in wide and _word_at(t, i) is not None:
                t = _word_as_field(t, i)
            key = (t.method, t.pieces, t.params, t.headers, t.body)
            if key in merged:
                merged[key].absorb(t)
            else:
                merged[key] = t
        templates = list(merged.values())
    return templates


def _word_as_field(t: Template, i: int) -> Template:
    """``t`` with its path's ``i``-th piece (a word) a text field of that word's length."""
    word = t.pieces[i]
    before = next((p for p in reversed(t.pieces[:i]) if isinstance(p, str) and p), "")
    taken = {p[-1] for p in (*t.pieces, *t.params) if isinstance(p, tuple)} | set(t.low) | set(t.lengths)
    name = _unique(_base(before), taken)
    pieces = (*t.pieces[:i], (TEXT_FIELD, name), *t.pieces[i + 1:])
    # ``t`` itself is left behind (the templates are rebuilt from these): its counts are this one's
    return replace(t, pieces=pieces, lengths={**t.lengths, name: [len(word) * t.count, t.count]})


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
