"""The example apps (examples/): each served by a real server from its directory on Arena's own
PostgreSQL, answering its pages as HTML and JSON, creating a post, with its own Server-Timing metric
beside Arena's; and their experiment files read."""

import json
from pathlib import Path

import pytest

from arena.http_client import Client
from arena.plan.experiment import load_experiment
from arena.servers.launch import ServerSpec, start
from arena.services import started_services
from arena.subjects.user import user_app
from tests.conftest import require_server

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def test_the_example_experiments_read_and_use_the_mix():
    for name in ("rails", "django"):
        exp = load_experiment(EXAMPLES / name / "experiment.toml")
        (wl,) = exp.workloads
        assert wl.mix is not None and [r.name for r in wl.mix.requests] == ["list", "show", "show-json", "create"]
        assert {s.kind for s in exp.services} == {"postgres"}


@pytest.mark.integration
@pytest.mark.parametrize("server, source, metric", [
    ("puma", {"source": "examples/rails/config.ru"}, "sql.active_record"),
    ("gunicorn-gthread", {"source": "blog.wsgi:application", "chdir": "examples/django"}, "sql"),
])
def test_an_example_app_serves_its_pages_from_postgres(server, source, metric):
    require_server(server)
    app = user_app(base=ROOT, health="/up", serves=("rack", "wsgi"), interface=None if server == "puma" else "wsgi",
                   **source)
    with started_services(["postgres"], [1]) as env:
        with start(ServerSpec(server, app, threads=2, cpus=[1], env=env)) as running:
            with Client(running.host, running.port, timeout=30) as client:
                page = client.get("/posts/42")
                assert page.status == 200 and b"Post number 42" in page.body and b"<html>" in page.body
                timing = page.headers["server-timing"]
                assert f"{metric};dur=" in timing and "cpu;dur=" in timing  # the app's and Arena's
                shown = json.loads(client.get("/posts/42", headers={"Accept": "application/json"}).body)
                assert shown["author"]["id"] == 43  # post i is by author 1 + i % 100 (schema.sql)
                listed = client.get("/posts?page=2", headers={"Accept": "application/json"})
                assert [p["id"] for p in json.loads(listed.body)][:2] == [9980, 9979]
                created = client.request("POST", "/posts", body=b"author_id=7&title=t&body=b",
                                         headers={"Accept": "application/json",
                                                  "Content-Type": "application/x-www-form-urlencoded"})
                assert created.status == 201 and json.loads(created.body)["author"]["id"] == 7
