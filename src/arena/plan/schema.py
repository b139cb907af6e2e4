"""An experiment file checked against schemas/experiment.schema.json (jsonschema): the one check of
its shape (every key known, every value of its type, range, pattern or choices). What a schema
cannot say (a server's knobs and the apps it serves, this machine's CPUs, the driver's abilities,
keys that exclude each other) the reader checks after it.

The first problem becomes one line naming the file, the key (servers[0].threads), the value as the
file writes it and what is allowed: the schema's own ``x-allowed`` where a value has one (a pattern
says nothing to a reader), else said from its type and bounds.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from arena import paths
from arena.plan.reader import KeyProblem

TYPES = {"string": "a string", "boolean": "true or false", "integer": "a whole number", "number": "a number",
         "array": "a list", "object": "a table"}


@lru_cache(maxsize=1)
def _validator():
    import jsonschema

    schema = json.loads(paths.schema("experiment.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def check(data: dict[str, Any], file: str) -> KeyProblem | None:
    """Raise KeyProblem for the first problem of ``data`` (the most relevant, as jsonschema ranks
    them). A problem under a node marked ``x-reader`` (a server's knobs and settings, its
    environment, the topology, the services: the catalog knows each server's own bounds and says
    them better) is returned instead, for the caller to raise if the reader, which checks them with
    the catalog, lets the file pass."""
    from jsonschema.exceptions import relevance

    problems = []
    for e in _validator().iter_errors(data):
        deferred = _walk(e)[2]
        problems.append((deferred, relevance(e), e))
    if not problems:
        return None
    now = [(r, e) for d, r, e in problems if not d]
    if now:
        raise _problem(max(now, key=lambda re_: re_[0])[1], file, data)
    return _problem(max(((r, e) for _, r, e in problems), key=lambda re_: re_[0])[1], file, data)


def _problem(e, file: str, data: Any) -> KeyProblem:
    path, value = list(e.absolute_path), e.instance
    if e.validator == "additionalProperties":
        extra = sorted(k for k in e.instance if k not in e.schema.get("properties", {}))
        path, value = path + [extra[0]], e.instance[extra[0]]
        allowed = f"unknown key (allowed: {', '.join(sorted(e.schema.get('properties', {})))})"
    elif e.validator == "required":
        missing = next(k for k in e.validator_value if k not in e.instance)
        path, value = path + [missing], None
        allowed = e.schema.get("x-required", {}).get(missing) or "is required"
    elif e.validator == "dependentRequired":
        given = next(k for k, needs in e.validator_value.items() if k in e.instance and any(n not in e.instance for n in needs))
        path, value = path + [given], e.instance[given]
        allowed = e.schema.get("x-dependent") or f"needs {', '.join(e.validator_value[given])} too"
    elif e.validator == "propertyNames":
        bad = next(k for k in e.instance if not _matches(e.validator_value, k))
        path, value = path + [bad], e.instance[bad]
        allowed = e.validator_value.get("x-allowed") or "not a valid name"
    elif e.validator == "not" and "x-not" in e.schema:
        key = e.schema["x-not"]["key"]
        path, value, allowed = path + [key], e.instance.get(key), e.schema["x-not"]["allowed"]
    else:
        allowed, depth, _ = _walk(e)
        if depth is not None:  # the node that says what is allowed: its key and value
            for _ in range(len(path) - depth):
                path.pop()
            value = data
            for step in path:
                value = value[step]
        allowed = allowed or say(e.schema)
    return KeyProblem(file, where(path), value, allowed)


# schema keywords that go one step down into the instance (a key or an index)
_DOWN = {"properties", "patternProperties", "additionalProperties", "items", "prefixItems"}
_NAMED = {"properties", "patternProperties", "prefixItems"}  # followed by a name or index
_KEYED = {"properties", "patternProperties", "additionalProperties"}


def _walk(e) -> tuple[str | None, int | None, bool]:
    """Along the schema path to the failing keyword: the deepest ``x-allowed`` and how deep in the
    instance its node is, and whether a node marked ``x-reader`` was passed."""
    node: Any = _validator().schema
    steps = list(e.absolute_schema_path)[:-1]  # up to the node that holds the failing keyword
    found, found_depth, reader, depth, i = None, None, False, 0, 0

    def visit(n):
        nonlocal found, found_depth, reader
        while isinstance(n, dict):
            if "x-allowed" in n:
                found, found_depth = n["x-allowed"], depth
            reader = reader or bool(n.get("x-reader"))
            if "$ref" not in n:
                break
            n = _resolve(n["$ref"])
        return n

    node = visit(node)
    while i < len(steps):
        step = steps[i]
        if step in _KEYED:  # into one key of a table: what its table allows says nothing of the key
            found = found_depth = None
        if step in _NAMED and i + 1 < len(steps):
            node, i, depth = node[step][steps[i + 1]], i + 2, depth + 1
        elif step in _DOWN:
            node, i, depth = node[step], i + 1, depth + 1
        else:
            node, i = node[step], i + 1
        node = visit(node)
    return found, found_depth, reader


def _matches(schema: dict, value: Any) -> bool:
    import jsonschema

    return jsonschema.Draft202012Validator(schema).is_valid(value)


def where(path: list[str | int]) -> str:
    """["servers", 0, "threads"] -> servers[0].threads."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def say(schema: dict) -> str:
    """What a schema node allows, in words: its ``x-allowed``, else from its type and bounds."""
    if "x-allowed" in schema:
        return schema["x-allowed"]
    if "$ref" in schema:
        return say(_resolve(schema["$ref"]))
    for key in ("oneOf", "anyOf"):
        if key in schema:
            one, *rest = schema[key]
            if len(rest) == 1 and rest[0].get("type") == "array" and rest[0].get("items") == one:
                return say(one) + ", or a list of them"  # a value or a grid axis of them
            return "must be " + " or ".join(say(s).removeprefix("must be ") for s in schema[key])
    if "enum" in schema or "const" in schema:
        choices = schema.get("enum") or [schema["const"]]
        return "must be " + " or ".join(repr(c) if isinstance(c, str) else json.dumps(c) for c in choices)
    kind = schema.get("type")
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum")
        above = "exclusiveMinimum" in schema
        text = f"must be {TYPES[kind]}"
        if lo is not None and hi is not None and not above:
            return f"{text} from {_number(lo)} to {_number(hi)}"
        if lo is not None:
            text += f" above {_number(lo)}" if above else f" of at least {_number(lo)}"
        return text + (f" up to {_number(hi)}" if hi is not None else "")
    if kind == "array":
        return f"must be a list of {say(schema['items']).removeprefix('must be ')}" if "items" in schema else \
            "must be a list"
    if isinstance(kind, list):
        return "must be " + " or ".join(TYPES[k] for k in kind)
    if kind in TYPES:
        return f"must be {TYPES[kind]}"
    return "is not allowed here"


def _number(v: float) -> str:
    """A bound as the file would write it: 9223372036854775807, 1e7 -> 10000000, 0.5."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _resolve(ref: str) -> dict:
    node: Any = _validator().schema
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node
