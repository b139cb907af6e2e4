import os

import pytest

from arena.servers import catalog


def require_server(name: str) -> None:
    """Skip when ``name`` is not installed, unless ARENA_REQUIRE_ALL=1 (make test, CI): then fail,
    so a missing install step can never pass as a skip."""
    if not catalog.available(catalog.CATALOG[name]):
        message = f"{name} is not installed ({catalog.CATALOG[name].install_hint})"
        if os.environ.get("ARENA_REQUIRE_ALL") == "1":
            pytest.fail(message)
        pytest.skip(message)
