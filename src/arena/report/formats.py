"""Which formats each command that prints data offers, and the schema of its JSON: one table, read by
the command line (``--format NAME``, and ``--json`` for ``--format json`` on every one of them) and by
the tests that validate each command's JSON against its schema. Text comes first: the default."""

from __future__ import annotations

# command -> (its formats, the schema of its JSON document in schemas/)
FORMATS: dict[str, tuple[tuple[str, ...], str]] = {
    "show": (("text", "json", "markdown", "junit"), "answer"),
    "compare": (("text", "json", "markdown", "junit"), "compare"),
    "tune": (("text", "json"), "tune"),
    "recommend": (("text", "json"), "recommend"),
    "predict": (("text", "json"), "predict"),
    "simulate": (("text", "json"), "simulate"),
    "check": (("text", "json"), "check"),
    "servers": (("text", "json"), "servers"),
    "ls": (("text", "json"), "ls"),
    "reproduce": (("text", "json"), "reproduce"),
}

WHAT = {"text": "for a terminal", "json": "a document for scripts", "markdown": "a pull-request comment or job summary",
        "junit": "JUnit XML for a CI's test report"}


def formats(command: str) -> tuple[str, ...]:
    return FORMATS[command][0]


def schema(command: str) -> str:
    """The path of the command's JSON schema, from the project's root."""
    return f"schemas/{FORMATS[command][1]}.schema.json"
