"""Request mix files: read and checked in one place (arena.mix), handed to arena-load as its --mix
JSON; arena-load draws the templated values (its own tests check the drawing)."""

import json

import pytest

from arena.drivers.native import build_argv
from arena.drivers.spec import LoadSpec
from arena.errors import ArenaError
from arena.plan.parse import parse_experiment
from arena.mix import load_mix, parse_mix

MIX = """
[[requests]]
name = "show"
weight = 6
path = "/posts/{id:1..10000}"
headers = { Accept = "application/json" }

[[requests]]
weight = 1
method = "POST"
path = "/posts"
form = { title = "Post {n:1..1000}", body = "Text of post {n}" }

[[requests]]
weight = 1
method = "POST"
path = "/api/posts"
json = { title = "T {n:5..9}", tags = ["a"] }
"""


def test_a_toml_mix_becomes_arena_loads_json_with_bodies_and_content_types(tmp_path):
    (tmp_path / "m.toml").write_text(MIX)
    mix = load_mix(tmp_path / "m.toml")
    show, form, js = mix.arena_load()
    assert show == {"weight": 6, "method": "GET", "path": "/posts/{id:1..10000}",
                    "headers": {"Accept": "application/json"}, "body": ""}
    assert form["body"] == "title=Post%20{n:1..1000}&body=Text%20of%20post%20{n}"
    assert form["headers"] == {"Content-Type": "application/x-www-form-urlencoded"}
    assert json.loads(js["body"].replace("{n:5..9}", "7")) == {"title": "T 7", "tags": ["a"]}
    assert js["headers"] == {"Content-Type": "application/json"}
    assert mix.methods == ("GET", "POST")


def test_a_json_mix_may_be_arena_loads_own_list(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps([{"weight": 2, "path": "/a"}, {"path": "/b", "weight": 0}]))
    assert load_mix(tmp_path / "m.json").arena_load() == [
        {"weight": 2, "method": "GET", "path": "/a", "headers": {}, "body": ""}]  # weight 0: left out


@pytest.mark.parametrize("requests, message", [
    ([{"path": "posts"}], 'm: requests[0].path = "posts": must start with /'),
    ([{"path": "/a b"}], 'm: requests[0].path = "/a b": must start with / and be printable ASCII'),
    ([{"path": "/a", "weight": -1}], "m: requests[0].weight = -1: must be a whole number from 0 to 1000000"),
    ([{"path": "/a", "weight": 0}], "m: requests: at least one request or session needs a weight above 0"),
    ([{"path": "/a", "method": "BREW"}], 'm: requests[0].method = "BREW": must be one of GET, HEAD, POST'),
    ([{"path": "/a", "body": "x"}], 'm: requests[0].method = "GET": a request with a body is POST'),
    ([{"path": "/a", "method": "POST", "body": "x", "json": {}}], "m: requests[0].json = {}: give one of body, form or json"),
    ([{"path": "/p/{id:9..1}"}], 'm: requests[0].path = "/p/{id:9..1}": {id:9..1}: a range runs from a low to a high'),
    ([{"path": "/p/{id:1..2}/{id:1..3}"}], "{id:1..3}: id is drawn twice (repeat it as {id})"),
    ([{"path": "/a", "headers": {"X-A": "1\r\nX-B: 2"}}], "m: requests[0].headers = "),
    ([{"path": "/a", "colour": 1}], "m: requests[0].colour = 1: unknown key"),
    ([], "m: requests: must be 1 to 1000 [[requests]] tables"),
    # a mistyped template is refused, not sent as text
    ([{"path": "/p/{x:a..b}"}], "m: requests[0].path = \"/p/{x:a..b}\": '{x:a..b}' is not a template: {name}, "
                                "{name:lo..hi} with whole numbers lo <= hi <= 1000000000000000, {name:uuid}, "
                                "{name:hex:N} or {name:token:N}"),
    ([{"path": "/p/{t:hex:0}"}], 'm: requests[0].path = "/p/{t:hex:0}": {t:hex:0}: a token is 1 to 64 characters'),
    ([{"path": "/p/{t:uuid}/{t:token:8}"}], "{t:token:8}: t is drawn twice (repeat it as {t})"),
    ([{"path": "/p/{t:base32:8}"}], "'{t:base32:8}' is not a template"),
    ([{"path": "/p/{id:1..12345678901234567890}"}], "'{id:1..12345678901234567890}' is not a template"),
    ([{"path": "/p/{id"}], "'{id' is not a template: {name}, {name:lo..hi} with whole numbers lo <= hi <= "
                           "1000000000000000, {name:uuid}, {name:hex:N} or {name:token:N} (unclosed)"),
    ([{"path": "/a", "method": "POST", "form": {"t": "{n:1..9"}}], "m: requests[0].body = "),
])
def test_bad_mixes_are_one_line_errors_naming_the_request_and_key(requests, message):
    with pytest.raises(ArenaError) as e:
        parse_mix({"requests": requests}, "m")
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


SESSIONS = """
[[requests]]
path = "/"
weight = 3

[[sessions]]
name = "writer"
weight = 2
think = "200ms"
[[sessions.steps]]
path = "/posts/new"
capture = [{ name = "csrf", regex = 'name="csrf" value="([^"]+)"' }]
[[sessions.steps]]
method = "POST"
path = "/posts/new"
form = { csrf = "{csrf}", title = "T {n:1..9}" }
capture = [{ name = "post", header = "Location", regex = '/posts/([0-9]+)' }, { name = "etag", header = "ETag" }]
[[sessions.steps]]
path = "/posts/{post}"
headers = { "If-None-Match" = "{etag}" }

[[sessions]]
name = "unused"
weight = 0
steps = [{ path = "/x" }]
"""


def test_sessions_become_arena_loads_object_with_their_steps_and_captures(tmp_path):
    (tmp_path / "m.toml").write_text(SESSIONS)
    mix = load_mix(tmp_path / "m.toml")
    doc = mix.arena_load()
    assert doc["requests"] == [{"weight": 3, "method": "GET", "path": "/", "headers": {}, "body": ""}]
    (writer,) = doc["sessions"]  # weight 0: left out
    assert (writer["name"], writer["weight"], writer["think"], len(writer["steps"])) == ("writer", 2, "200ms", 3)
    form, post = writer["steps"][1], writer["steps"][2]
    # a captured value stays a {name} in the form: arena-load percent-encodes it when it sends it
    assert form["body"] == "csrf={csrf}&title=T%20{n:1..9}"
    assert form["capture"] == [{"name": "post", "regex": "/posts/([0-9]+)", "header": "Location"},
                               {"name": "etag", "header": "ETag"}]
    assert post["headers"] == {"If-None-Match": "{etag}"} and "capture" not in post
    assert mix.methods == ("GET", "POST") and mix.first_get() == "/"
    only = parse_mix({"sessions": [{"name": "s", "steps": [{"path": "/s/{i:4..9}"}]}]}, "m")
    assert only.requests == () and only.first_get() == "/s/4"


@pytest.mark.parametrize("session, message", [
    ({"steps": [{"path": "/"}]}, "m: sessions[0].name: missing: a session needs a name"),
    ({"name": "s", "steps": []}, "m: sessions[0].steps = []: must be 1 to 100 [[sessions.steps]] tables"),
    ({"name": "s", "think": "soon", "steps": [{"path": "/"}]}, 'm: sessions[0].think = "soon": must be a duration'),
    ({"name": "s", "colour": 1, "steps": [{"path": "/"}]}, "m: sessions[0].colour = 1: unknown key"),
    ({"name": "s", "steps": [{"path": "/", "weight": 2}]}, "m: sessions[0].steps[0].weight = 2: unknown key"),
    ({"name": "s", "steps": [{"path": "/", "capture": [{"name": "1a", "regex": "x"}]}]},
     "m: sessions[0].steps[0].capture = "),
    ({"name": "s", "steps": [{"path": "/", "capture": [{"name": "a"}]}]}, "a: give regex or json"),
    ({"name": "s", "steps": [{"path": "/", "capture": [{"name": "a", "regex": "("}]}]},
     "a: regex does not compile"),
    ({"name": "s", "steps": [{"path": "/", "capture": [{"name": "a", "regex": "x", "json": "/x"}]}]},
     "a: give regex or json, not both"),
    ({"name": "s", "steps": [{"path": "/", "capture": [{"name": "a", "json": "id"}]}]},
     "a: json is a JSON pointer into the body, such as /id"),
    ({"name": "s", "steps": [{"path": "/", "capture": [{"name": "a", "regex": "(?<=v=)\\w+"}]}]},
     "a: arena-load's regexes (Rust's regex crate) have no look-around or back-reference"),
    ({"name": "s", "steps": [{"path": "/", "capture": [{"name": "a", "regex": "x", "from": "body"}]}]},
     "from: unknown key (allowed: header, json, name, regex)"),
])
def test_bad_sessions_are_one_line_errors_naming_the_session_step_and_key(session, message):
    with pytest.raises(ArenaError) as e:
        parse_mix({"sessions": [session]}, "m")
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_json_bodys_own_braces_are_text_and_templates_in_it_are_drawn():
    mix = parse_mix({"requests": [{"path": "/a", "method": "POST", "json": {"a": {"b": 1}, "id": "{id:1..9}"}}]}, "m")
    assert mix.requests[0].body == '{"a":{"b":1},"id":"{id:1..9}"}'


def test_a_bad_template_in_an_experiments_mix_is_refused_at_dry_run(tmp_path):
    (tmp_path / "mix.toml").write_text('[[requests]]\npath = "/posts/{id:1..x}"\n')
    (tmp_path / "e.toml").write_text('name = "e"\n[workload]\nmix = "mix.toml"\n[load]\nconcurrency = [1]\n'
                                     '[[servers]]\nserver = "puma"\n')
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "arena", "run", str(tmp_path / "e.toml"), "--dry-run"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "'{id:1..x}' is not a template" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_an_experiment_names_a_mix_relative_to_its_file_and_only_arena_load_runs_it(tmp_path):
    (tmp_path / "m.toml").write_text(MIX)
    base = {"name": "x", "workload": {"mix": "m.toml"}, "servers": [{"server": "puma"}]}
    exp = parse_experiment(base, str(tmp_path / "x.toml"))
    (wl,) = exp.workloads
    assert wl.mix_file == "m.toml" and len(wl.mix.requests) == 3
    with pytest.raises(ArenaError, match=r'x.toml: workload.mix = "a mix file": driver "wrk": wrk sends one request, '
                                         r'not a mix \(drivers that can: arena-load\)'):
        parse_experiment({**base, "driver": "wrk"}, str(tmp_path / "x.toml"))
    with pytest.raises(ArenaError, match=r'x.toml: workload.path = "/a": a workload is one request'):
        parse_experiment({**base, "workload": {"mix": "m.toml", "path": "/a"}}, str(tmp_path / "x.toml"))
    with pytest.raises(ArenaError, match=r'x.toml: workload.mix = "nope.toml": no such mix file$'):
        parse_experiment({**base, "workload": {"mix": "nope.toml"}}, str(tmp_path / "x.toml"))
    (tmp_path / "bad.toml").write_text("[[requests]]\npath = 'x'\n")
    with pytest.raises(ArenaError, match=r'x.toml: workload.mix = "bad.toml": requests\[0\].path = "x": must start with /'):
        parse_experiment({**base, "workload": {"mix": "bad.toml"}}, str(tmp_path / "x.toml"))


def test_the_native_driver_passes_the_mix_as_a_file(tmp_path):
    (tmp_path / "m.toml").write_text(MIX)
    spec = LoadSpec("http://127.0.0.1:1/", mix=load_mix(tmp_path / "m.toml"), duration_s=1)
    argv = build_argv(spec, tmp_path / "arena-load", tmp_path / "out.json", tmp_path / "mix.json")
    assert argv[argv.index("--mix") + 1] == str(tmp_path / "mix.json")
