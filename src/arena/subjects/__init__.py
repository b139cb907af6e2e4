"""The subject apps: one contract (spec.md), several implementations, named here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arena.errors import ArenaError

RUBY_DIR = Path(__file__).parent / "ruby"


@dataclass(frozen=True)
class App:
    name: str
    language: str  # "python" | "ruby"
    interface: str  # "wsgi" | "asgi" | "rack"
    target: str  # "module:attribute" for Python, the rackup file for Ruby
    description: str


APPS: dict[str, App] = {
    a.name: a
    for a in (
        App("wsgi", "python", "wsgi", "arena.subjects.python.wsgi:app", "raw WSGI (PEP 3333)"),
        App("asgi", "python", "asgi", "arena.subjects.python.asgi:app", "raw ASGI 3"),
        App("flask", "python", "wsgi", "arena.subjects.python.flask_app:app", "Flask"),
        App("rack", "ruby", "rack", str(RUBY_DIR / "rack.ru"), "raw Rack"),
        App("sinatra", "ruby", "rack", str(RUBY_DIR / "sinatra.ru"), "Sinatra (modular)"),
        App("rails", "ruby", "rack", str(RUBY_DIR / "rails.ru"), "single-file Rails 6.1 (API)"),
    )
}


def get_app(name: str) -> App:
    try:
        return APPS[name]
    except KeyError:
        raise ArenaError(f"--app: unknown app '{name}' (apps: {', '.join(APPS)})") from None
