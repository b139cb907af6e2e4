"""The subject apps: one contract (spec.md), several implementations, named here; and a user's own
app (user.py), served with Arena's timing around it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from arena.errors import ArenaError

if TYPE_CHECKING:
    from arena.subjects.user import UserApp

RUBY_DIR = Path(__file__).parent / "ruby"


@dataclass(frozen=True)
class App:
    name: str
    language: str  # "python" | "ruby"
    interface: str  # "wsgi" | "asgi" | "rack"
    target: str  # "module:attribute" for Python, the rackup file for Ruby
    description: str
    health: str = "/health"  # answers below 400 when the app is ready
    user: UserApp | None = None  # a user's app: where it lives and how it is run (None: a built-in subject)


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
