"""The output formats, registered once: every command that prints data offers ``--format`` from
here (and ``--json``, the same as ``--format json``), and the tests that validate each command's JSON
read its schema here.

``text`` (for a terminal, drawn by the command line) and ``json`` (each command's document, of its
schema in schemas/) are every such command's. Any other format is one module of this package that
registers a :class:`Format`: its name, what it is for, and a renderer for each command it serves,
taking that command's view (:class:`ShowView`, :class:`CompareView`) and giving the text to print.
``arena export``'s formats are all registered (csv by default): their renderers take an
:class:`ExportView` and give file name -> text.
Adding one is that module and its test (as hyperfine's exporters: one file a format, one registry
the command line reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

# command -> the schema of its JSON document (schemas/NAME.schema.json): the commands that print data
SCHEMAS = {"show": "answer", "compare": "compare", "tune": "tune", "recommend": "recommend", "predict": "predict",
           "simulate": "simulate", "check": "check", "servers": "servers", "ls": "ls", "reproduce": "reproduce"}
BUILT_IN = {"text": "for a terminal", "json": "a document for scripts"}
OWN = {"export": "csv"}  # commands whose formats are all registered, and their default


@dataclass(frozen=True)
class Format:
    name: str
    what: str  # what it is for, as --format's help says it
    renders: Mapping[str, Callable[[Any], Any]]  # command -> its renderer: the command's view in, text out
    many: bool = False  # an export format that writes a file per cell (a directory is given)


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


@dataclass(frozen=True)
class ExportView:
    """``arena export`` of one experiment: its name, its runs and failures read as a format needs
    them (``read(detail)``: "none", "summary" or "whole", the store's levels of a run's load
    document), and hlog's interval (``per``: "run" or "second")."""

    name: str
    read: Callable[[str], tuple[Sequence, Sequence]]
    per: str = "run"


_FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add ``fmt`` to the formats every command it renders offers; a name is registered once."""
    if fmt.name in _FORMATS or fmt.name in BUILT_IN and set(fmt.renders) & set(SCHEMAS):
        raise ValueError(f"format {fmt.name!r} is registered already")
    unknown = set(fmt.renders) - set(SCHEMAS) - set(OWN)
    if unknown:
        raise ValueError(f"format {fmt.name!r}: no command {sorted(unknown)[0]!r} prints data")
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    del _FORMATS[name]


def formats(command: str) -> tuple[str, ...]:
    """The formats ``command`` offers, its default first: text (then json) for a command that prints
    data, then those registered for it; an OWN command's are all registered."""
    mine = tuple(f.name for f in _FORMATS.values() if command in f.renders)
    if command in OWN:
        return (OWN[command], *(f for f in mine if f != OWN[command]))
    return ("text", "json", *mine)


def what(name: str, command: str | None = None) -> str:
    """What the format ``name`` is for (``command``'s own where a registered one shares a built-in's name)."""
    fmt = _FORMATS.get(name)
    if name in BUILT_IN and (fmt is None or command not in fmt.renders):
        return BUILT_IN[name]
    return fmt.what


def many(name: str) -> bool:
    """Whether the format writes a file per cell (a directory is given)."""
    return _FORMATS[name].many


def schema(command: str) -> str:
    """The path of the command's JSON schema, from the project's root."""
    return f"schemas/{SCHEMAS[command]}.schema.json"


def render(command: str, name: str, view: Any) -> Any:
    """``view`` of ``command`` in the registered format ``name``: text (export's: file name -> text)."""
    return _FORMATS[name].renders[command](view)
