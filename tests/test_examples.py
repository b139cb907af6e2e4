"""The example apps (examples/): each served by a real server from its directory on Arena's own
PostgreSQL, answering its pages as HTML and JSON, creating a post, with its own Server-Timing metric
beside Arena's, and a writer's session (session.toml) posting its form with the CSRF token it
captured; and their experiment files read."""

import json
from pathlib import Path

import pytest

from arena.drivers import native
from arena.drivers.spec import LoadSpec
from arena.http_client import Client
from arena.mix import load_mix
from arena.plan.parse import load_experiment
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
@pytest.mark.parametrize("server, source, metric, example, forged", [
    ("puma", {"source": "examples/rails/config.ru"}, "sql.active_record", "rails", 422),
    ("gunicorn-gthread", {"source": "blog.wsgi:application", "chdir": "examples/django"}, "sql", "django", 403),
])
def test_an_example_app_serves_its_pages_from_postgres(server, source, metric, example, forged):
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
                # the new-post form is checked: without its token and cookie the post is refused
                form = b"title=t&body=b&author_id=7"
                assert client.request("POST", "/posts/new", body=form, headers={
                    "Content-Type": "application/x-www-form-urlencoded"}).status == forged
            # a writer's session: the form's token captured, its cookie kept, the new post read back
            url = f"http://{running.host}:{running.port}/"
            mix = load_mix(EXAMPLES / example / "session.toml")
            m = native.run(LoadSpec(url=url, connections=2, requests=60, mix=mix), cpus=[0]).measured
            assert (m.errors, m.error_counts.get("capture", 0)) == (0, 0), m.error_counts
            assert set(m.status) == {200, 303} and m.status[303] >= 18, m.status  # 20 sessions, 2 perhaps cut
            assert 2 * m.status[303] <= m.status[200] <= 2 * m.status[303] + 2, m.status


@pytest.mark.integration
def test_a_har_recorded_browsing_the_django_example_replays_with_its_statuses(tmp_path):
    """Chromium (driven by Playwright) browses examples/django recording a HAR; `arena mix from-log`
    turns it into a mix, and arena-load sends the mix to the same app: each status class's share
    within 1 point of the HAR's (over the requests the mix kept: not the favicon)."""
    from tests.conftest import CHROMIUM, require_browser

    require_server("gunicorn-gthread")
    require_browser()
    from playwright.sync_api import sync_playwright

    from arena.app.traffic import from_log

    app = user_app(base=ROOT, health="/up", serves=("wsgi",), interface="wsgi", source="blog.wsgi:application",
                   chdir="examples/django")
    har, mix_file = tmp_path / "browse.har", tmp_path / "mix.toml"
    visits = ["posts", "posts/42", "posts?page=2", "posts/4242", "missing", "posts/777", "posts?page=3",
              "posts/42", "about", "posts"]
    with started_services(["postgres"], [1]) as env:
        with start(ServerSpec("gunicorn-gthread", app, threads=2, cpus=[1], env=env)) as running:
            url = f"http://{running.host}:{running.port}/"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                try:
                    context = browser.new_context(record_har_path=str(har), record_har_content="omit")
                    page = context.new_page()
                    for path in visits:
                        page.goto(url + path)
                    context.close()  # writes the HAR
                finally:
                    browser.close()
            from_log([str(har)], str(mix_file))  # arena mix from-log (whose CLI ends what this process started)
            result = native.run(LoadSpec(url=url, connections=2, requests=2000, mix=load_mix(mix_file)), cpus=[0])
    entries = [e for e in json.loads(har.read_text())["log"]["entries"] if "favicon" not in e["request"]["url"]]
    assert len(entries) == len(visits)  # every visit recorded, nothing else but the favicon

    def shares(statuses: list[int]) -> dict[str, float]:
        return {f"{c}xx": 100 * sum(1 for s in statuses if s // 100 == c) / len(statuses) for c in (2, 3, 4, 5)}

    recorded = shares([e["response"]["status"] for e in entries])
    replayed = shares([s for s, n in result.measured.status.items() for _ in range(n)])
    assert recorded["4xx"] == 20  # /missing and /about: the app has neither
    # the mix's weights hold the HAR's shares exactly: no 404 path merged into a 200 template
    mix = load_mix(mix_file)
    assert sum(r.weight for r in mix.requests if r.path in ("/missing", "/about")) == 2 == sum(
        r.weight for r in mix.requests) // 5
    # and the app answers the replay as it answered the browser; 2,000 draws of the seeded mix
    # (binomial spread of a 20% share: 0.9 point)
    assert all(abs(recorded[c] - replayed[c]) <= 1 for c in recorded), (recorded, replayed)
