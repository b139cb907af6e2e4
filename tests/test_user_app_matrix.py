"""Every Python server in the catalog loads a foreign app, for each interface it serves, in each form
a user writes one: a plain callable (module:app), a factory (module:make()) and a module inside a
package with an __init__ (package.module:application). The app lives in a temporary directory Arena
has never seen; a pass is the server started, the health path answered with Arena's timing by one of
the server's own processes, and nothing left after the stop (app.check.check_one)."""

from pathlib import Path

import pytest

from arena.app.check import check_one
from arena.servers import catalog
from arena.subjects.user import user_app
from tests.conftest import require_server

WSGI = """\
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"wsgi ok"]

def make():
    return app
"""

ASGI = """\
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        message = await receive()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"asgi ok"})

def make():
    return app
"""

FORMS = {"plain": "{kind}mod:app", "factory": "{kind}mod:make()", "package": "{kind}pkg.web:application"}

PYTHON = [(name, interface) for name, server in catalog.CATALOG.items() if server.language == "python"
          for interface in server.interfaces]


@pytest.fixture(scope="module")
def foreign(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("foreign")
    for kind, text in (("wsgi", WSGI), ("asgi", ASGI)):
        (where / f"{kind}mod.py").write_text(text)
        (where / f"{kind}pkg").mkdir()
        (where / f"{kind}pkg" / "__init__.py").write_text("")
        (where / f"{kind}pkg" / "web.py").write_text(text + "\napplication = app\n")
    return where


def test_the_matrix_covers_every_python_server_and_interface():
    assert {i for _, i in PYTHON} == {"wsgi", "asgi"}
    assert {"hypercorn", "granian", "uvicorn", "gunicorn-gthread", "waitress", "uwsgi"} <= {s for s, _ in PYTHON}


@pytest.mark.integration
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("server,interface", PYTHON)
def test_every_python_server_loads_a_foreign_app(foreign, server, interface, form):
    require_server(server)
    source = FORMS[form].format(kind=interface)
    app = user_app(source, base=foreign, chdir=".", interface=interface, serves=(interface,))
    result = check_one(server, app, processes=1)
    assert (result.status, result.problems) == ("pass", []), result.problems


def test_a_namespace_package_in_the_apps_directory_is_named_as_the_likely_cause(tmp_path, monkeypatch):
    import importlib
    import sys

    from arena.subjects.user import WRAP_DIR

    (tmp_path / "shadowed").mkdir()  # a checkout named like the package, without __init__.py
    monkeypatch.syspath_prepend(str(WRAP_DIR))
    monkeypatch.delenv("ARENA_USER_INTERFACE", raising=False)
    monkeypatch.setenv("ARENA_USER_APP", "shadowed:app")
    monkeypatch.setenv("ARENA_USER_DIR", str(tmp_path))
    wrap = importlib.import_module("arena_wrap")
    assert not hasattr(wrap, "wsgi") and not hasattr(wrap, "asgi")  # nothing bound without an interface
    try:
        with pytest.raises(RuntimeError, match=rf"module 'shadowed' has no attribute 'app' \(it is the directory "
                                               rf"{tmp_path / 'shadowed'}, a folder without __init__.py"):
            wrap._load()
    finally:
        sys.modules.pop("shadowed", None)
        sys.path.remove(str(tmp_path))


def test_the_wsgi_wrapper_frames_a_body_the_app_left_unframed(monkeypatch):
    import importlib

    from arena.subjects.user import WRAP_DIR

    monkeypatch.syspath_prepend(str(WRAP_DIR))
    wrap = importlib.import_module("arena_wrap")

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ab", b"cde"]

    def sized(environ, start_response):
        start_response("200 OK", [("Content-Length", "5")])
        return [b"abcde"]

    def headers_of(handler, method="GET"):
        seen = []
        body = wrap.wrap_wsgi(handler)({"REQUEST_METHOD": method}, lambda s, h, e=None: seen.extend(h))
        return b"".join(body), [k for k, v in seen if k == "Content-Length"], dict(seen)

    body, lengths, headers = headers_of(app)
    assert body == b"abcde" and lengths == ["Content-Length"] and headers["Content-Length"] == "5"
    assert headers_of(app, "HEAD")[1] == []  # a HEAD answer's length is the GET's, unknown here
    assert headers_of(sized)[1] == ["Content-Length"]  # the app's own, not a second one
