"""The output formats, registered once: every command that prints data offers ``--format`` from
here (and ``--json``, the same as ``--format json``), and the tests that validate each command's JSON
read its schema here.

``text`` (for a terminal, drawn by the command line) and ``json`` (each command's document, of its
schema in schemas/) are every such command's. Any other format is one module of this package that
registers a :class:`Format`: its name, what it is for, and a renderer for each command it serves,
taking that command's view (:class:`ShowView`, :class:`CompareView`) and giving the text to print.
Adding one is that module and its test (as hyperfine's exporters: one file a format, one registry
the command line reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

# command -> the schema of its JSON document (schemas/NAME.schema.json): the commands that print data
SCHEMAS = {"show": "answer", "compare": "compare", "tune": "tune", "recommend": "recommend", "predict": "predict",
           "simulate": "simulate", "check": "check", "servers": "servers", "ls": "ls", "reproduce": "reproduce"}
BUILT_IN = {"text": "for a terminal", "json": "a document for scripts"}


@dataclass(frozen=True)
class Format:
    name: str
    what: str  # what it is for, as --format's help says it
    renders: Mapping[str, Callable[[Any], str]]  # command -> its renderer: the command's view in, text out


@dataclass(frozen=True)
class ShowView:
    """``arena show`` of one experiment: its answers (one per workload), thresholds, capacities and cells."""

    name: str
    answers: Sequence
    thresholds: Sequence
    capacities: Sequence
    cells: Sequence


@dataclass(frozen=True)
class CompareView:
    """``arena compare``: each cell's changes, the cells one side alone holds, the rules and those broken."""

    base: str
    new: str
    changes: Sequence
    alone: Sequence[str]
    broken: Sequence
    rules: Sequence


_FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add ``fmt`` to the formats every command it renders offers; a name is registered once."""
    if fmt.name in BUILT_IN or fmt.name in _FORMATS:
        raise ValueError(f"format {fmt.name!r} is registered already")
    unknown = set(fmt.renders) - set(SCHEMAS)
    if unknown:
        raise ValueError(f"format {fmt.name!r}: no command {sorted(unknown)[0]!r} prints data")
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    del _FORMATS[name]


def formats(command: str) -> tuple[str, ...]:
    """The formats ``command`` offers: text first (the default), json, then those registered for it."""
    return ("text", "json", *(f.name for f in _FORMATS.values() if command in f.renders))


def what(name: str) -> str:
    return BUILT_IN.get(name) or _FORMATS[name].what


def schema(command: str) -> str:
    """The path of the command's JSON schema, from the project's root."""
    return f"schemas/{SCHEMAS[command]}.schema.json"


def render(command: str, name: str, view: Any) -> str:
    """``view`` of ``command`` in the registered format ``name``."""
    return _FORMATS[name].renders[command](view)
