"""Requests (traffic.logs.Entry) -> request templates: a request mix (arena.mix's format) whose
weights are the log's counts. Pure.

A path's numeric segments become ``{name:lo..hi}`` over the range the log shows (named after the
segment before them: ``/posts/{post_id:1..9999}``), and so do a query's numeric values
(``?page={page:1..40}``); opaque tokens become arena-load's random tokens of their shape
(``{file_id:uuid}``, ``{commit_id:hex:40}``, ``{key:token:22}`` for base64url); requests that
differ only there are one template. What is neither stays as it is in the path; in a query, a
value that is neither is user data (a search, an e-mail): it is not written unless
``keep_values``, and the parameter is then dropped from the template (the summary names it). A
token longer than arena-load draws (mix.MAX_TOKEN) leaves its request out, counted.

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

    def add(self, numbers: dict[str, int], status: int | None) -> None:
        self.count += 1
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

    @property
    def written(self) -> int:
        return sum(t.count for t in self.kept)


@lru_cache(maxsize=4096)
def _base(before: str) -> str:
    """A field's name from the segment before it: posts -> post_id, categories -> category_id."""
    word = re.sub(r"[^A-Za-z0-9_]", "_", before).strip("_").lower()
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    return f"{word}_id" if word and not word[0].isdigit() else "id"


def _name(before: str, taken: set[str]) -> str:
    """_base's name, a repeat in one path with 2, 3, ..."""
    base = _base(before)
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name


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
            name = _name(before, taken)
            numbers[name] = int(seg)
            pieces.append((NUMBER_FIELD, name))
        elif (kind := token(seg)) is not None:
            if not kind:
                return None
            pieces.append((kind, _name(before, taken)))
        else:
            pieces.append(seg)
            before = seg
    params: list[str | tuple[str, str, str]] = []
    dropped = set()
    for key, value in parse_qsl(query, keep_blank_values=True) if query else ():
        ident = re.sub(r"[^A-Za-z0-9_]", "_", key).strip("_").lower() or "q"
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
        t = templates.get(key)
        if t is None:
            t = templates[key] = Template(key[0], key[1], key[2])
        t.add(numbers, e.status)
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
                  f"weight = {t.count}", f"method = {json.dumps(t.method)}", f"path = {json.dumps(t.path)}", ""]
    return "\n".join(lines)
