"""Reading a service's settings from an experiment table: each field's type and bounds, and a
one-line error naming the file, the key, the value and what is allowed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from arena.errors import ArenaError


@dataclass(frozen=True)
class Field:
    name: str
    type: type | tuple[type, ...]
    ok: Callable[[Any], bool]
    allowed: str


def read(given: dict[str, Any], fields: tuple[Field, ...], where: str) -> dict[str, Any]:
    """The given settings, checked (absent ones are left to the settings' defaults)."""
    names = {f.name for f in fields}
    for key, value in given.items():
        if key not in names:
            raise ArenaError(f"{where}{key} = {value!r}: unknown setting (allowed: {', '.join(sorted(names))})")
    out = {}
    for f in fields:
        if f.name not in given:
            continue
        v = given[f.name]
        right_type = isinstance(v, f.type) and (f.type is bool or not isinstance(v, bool))  # true is not 1
        if not right_type or not f.ok(v):
            shown = f'"{v}"' if isinstance(v, str) else repr(v).replace("True", "true").replace("False", "false")
            raise ArenaError(f"{where}{f.name} = {shown}: must be {f.allowed}")
        out[f.name] = v
    return out
