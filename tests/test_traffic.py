"""`arena mix from-log`: access logs of known weights and id ranges become the mix they were made
from; user data stays out; bad lines are counted, bad input is one line."""

import contextlib
import gzip
import json
import random
import re
import time

import numpy as np
import pytest

from arena.cli import main
from arena.mix import load_mix
from arena.traffic import logs
from arena.traffic.templates import build, shape

WEIGHTS = {"show": 0.62, "comments": 0.18, "create": 0.09, "asset": 0.08, "health": 0.03}


def combined_log(n: int, seed: int = 1) -> tuple[list[str], dict[str, int], dict[str, tuple[int, int]]]:
    """A combined log of ``n`` requests drawn from WEIGHTS, with the counts and id ranges drawn."""
    rng = random.Random(seed)
    counts = dict.fromkeys(WEIGHTS, 0)
    seen: dict[str, list[int]] = {"post_id": [], "user_id": [], "page": []}
    lines = []
    t0 = 1_700_000_000
    kinds, weights = zip(*WEIGHTS.items())
    for i in range(n):
        kind = rng.choices(kinds, weights)[0]
        counts[kind] += 1
        status = 200
        if kind == "show":
            post = rng.randint(3, 4999)
            seen["post_id"].append(post)
            req = f"GET /posts/{post} HTTP/1.1"
        elif kind == "comments":
            user, page = rng.randint(1, 800), rng.randint(1, 40)
            seen["user_id"].append(user)
            seen["page"].append(page)
            req = f"GET /users/{user}/comments?page={page}&q=secret{i} HTTP/1.1"
        elif kind == "create":
            req, status = "POST /posts HTTP/2.0", rng.choice((201, 201, 422))
        elif kind == "asset":
            req = f"GET /assets/app-{rng.randint(1, 3)}.css HTTP/1.1"
        else:
            req = "GET /health HTTP/1.1"
        stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(t0 + i // 10))
        lines.append(f'10.1.{i % 200}.{i % 250} - frank [{stamp}] "{req}" {status} {rng.randint(100, 9000)} '
                     f'"https://example.com/ref?x=\\"y\\"" "Mozilla/5.0 (X11; Linux x86_64)"')
    return lines, counts, {k: (min(v), max(v)) for k, v in seen.items()}


@contextlib.contextmanager
def recording_server():
    """A loopback HTTP server in this process answering 200 to every GET: (its URL, the paths asked)."""
    import http.server
    import threading

    seen: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_combined_log_of_known_weights_becomes_its_templates_with_exact_ranges():
    lines, counts, ranges = combined_log(100_000)
    entries = [e for e in logs.read(lines, "combined")]
    assert all(isinstance(e, logs.Entry) for e in entries) and logs.detect(lines[:20]) == "combined"
    built = build(entries)
    kept = {t.path: t for t in built.kept}
    assert set(kept) == {f"/posts/{{post_id:{ranges['post_id'][0]}..{ranges['post_id'][1]}}}",
                         f"/users/{{user_id:{ranges['user_id'][0]}..{ranges['user_id'][1]}}}/comments"
                         f"?page={{page:{ranges['page'][0]}..{ranges['page'][1]}}}", "/posts"}
    served = counts["show"] + counts["comments"] + counts["create"]
    share = {t.method + " " + t.path.partition("{")[0]: t.count / built.written for t in built.kept}
    truth = {"GET /posts/": counts["show"] / served, "GET /users/": counts["comments"] / served,
             "POST /posts": counts["create"] / served}
    assert share == pytest.approx(truth, abs=0.005)
    assert (built.static, built.health) == (counts["asset"], counts["health"])
    assert built.dropped_params == {"q": counts["comments"]}  # a search's text is user data


def test_the_written_mix_reads_back_and_holds_no_user_data(tmp_path, capsys):
    lines, counts, _ = combined_log(20_000, seed=2)
    log = tmp_path / "access.log.gz"
    log.write_bytes(gzip.compress("\n".join(lines).encode()))
    out = tmp_path / "mix.toml"
    assert main(["mix", "from-log", str(log), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "read 20,000 lines (combined) over 33.3 minutes" in said and "3 templates cover" in said
    mix = load_mix(out)
    assert [r.method for r in mix.requests] == ["GET", "GET", "POST"]
    text = out.read_text()
    assert "secret" not in text and "frank" not in text and "10.1." not in text and "Mozilla" not in text
    assert "statuses: 201" in text and "422" in text  # the log's statuses go with the template
    assert sorted(p.name for p in tmp_path.iterdir()) == ["access.log.gz", "mix.toml"]  # nothing else written
    kept = tmp_path / "kept.toml"
    assert main(["mix", "from-log", str(log), "-o", str(kept), "--keep-values", "--coverage", "0.5"]) == 0
    assert len(load_mix(kept).requests) == 1  # the top template alone covers half


def test_json_lines_and_vegeta_targets_are_read_likewise(tmp_path):
    docs = [{"verb": "GET", "uri": f"/orders/{i}/items/{i % 7}", "code": 200, "ts": 1_700_000_000 + i}
            for i in range(1, 301)]
    docs += [{"request": "DELETE /orders/5 HTTP/1.1", "status": 204, "time": "2023-11-14T22:13:20Z"}] * 50
    lines = [json.dumps(d) for d in docs] + ["not json at all", "[1, 2]"]
    got = list(logs.read(lines, "jsonl", {"method": "verb", "path": "uri", "status": "code", "time": "ts"}))
    skipped = [s for s in got if isinstance(s, logs.Skipped)]
    assert [(s.line, s.why) for s in skipped] == [(351, "not a JSON object"), (352, "not a JSON object")]
    built = build([e for e in got if isinstance(e, logs.Entry)])
    assert [(t.method, t.path, t.count) for t in built.kept] == [
        ("GET", "/orders/{order_id:1..300}/items/{item_id:0..6}", 300), ("DELETE", "/orders/{order_id:0..9}", 50)]  # one value: its digits' range
    vegeta = ["GET http://127.0.0.1:8080/users/12", "X-Account: 7", "", "POST http://127.0.0.1:8080/users",
              "Content-Type: application/json", "@body.json", "", "GET http://127.0.0.1:8080/users/40?page=2"]
    assert logs.detect(vegeta) == "vegeta"
    built = build([e for e in logs.read(vegeta, "vegeta") if isinstance(e, logs.Entry)])
    assert sorted((t.method, t.path) for t in built.kept) == [
        ("GET", "/users/{user_id:10..99}"), ("GET", "/users/{user_id:10..99}?page={page:0..9}"), ("POST", "/users")]


def test_bad_lines_are_counted_and_never_echoed(tmp_path, capsys):
    lines, _, _ = combined_log(1000, seed=3)
    lines[10] = "garbage with a password=hunter2 in it"
    lines[500] = '127.0.0.1 - - [x] "GET /half'
    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    assert main(["mix", "from-log", str(log), "-o", str(tmp_path / "m.toml")]) == 0
    said = capsys.readouterr().out
    assert f"2 lines skipped (first: {log}:11: not the combined log format)" in said and "hunter2" not in said


def test_opaque_tokens_become_random_tokens_of_their_shape_and_5xx_only_templates_are_left_out():
    entries = [logs.Entry("GET", "/files/3f2504e0-4f89-11d3-9a0c-0305e82c3301", 200, None),
               logs.Entry("GET", "/files/9b2c1e11-0000-41d3-8a0c-0305e82c3302", 200, None),
               logs.Entry("GET", "/commits/" + "ab12" * 10 + "?key=AbCdEfGhIjKlMnOpQrStUvWx12", 200, None),
               logs.Entry("GET", "/s/" + "f" * 65, 200, None),
               logs.Entry("GET", "/broken/1", 502, None), logs.Entry("GET", "/broken/2", 500, None),
               logs.Entry("GET", "/ok", 200, None)]
    built = build(entries)
    assert (built.tokens, built.failed_only) == (1, 2)  # 65 hex digits: longer than arena-load draws
    assert [(t.path, t.count) for t in built.kept] == [
        ("/files/{file_id:uuid}", 2), ("/commits/{commit_id:hex:40}?key={key:token:26}", 1), ("/ok", 1)]
    assert shape("GET", "/a/b?sort=desc&page=3", keep_values=False)[2] == {"sort"}
    # names are identifiers: after a segment that starts with a digit, for a repeat, for a query key
    key, numbers, *_ = shape("GET", "/2024-archive/7/posts/3/posts/4?Page-No=2", keep_values=False)
    assert numbers == {"v2024_archive_id": 7, "post_id": 3, "post_id2": 4, "page_no": 2}
    assert shape("GET", "/a/b?sort=desc&page=3", keep_values=True)[0][2] == ("sort=desc", ("page", "#", "page"))


def test_a_mix_is_written_only_whole_and_valid_and_never_over_its_log(tmp_path, capsys, monkeypatch):
    """A log's CONNECT line replaced an existing -o file with a mix the same command then refused
    (naming the output's requests[22].method, not the log's line), and -o naming the log overwrote
    it. Now requests no mix can send are skipped and counted with their lines; -o is never one of the
    logs; and a mix is checked whole before it is written, an existing output left as it was."""
    lines, _, _ = combined_log(200, seed=4)
    lines[21] = '10.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "CONNECT example.com:443 HTTP/1.1" 200 0 "-" "curl"'
    lines[40] = '10.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "PROPFIND /dav/ HTTP/1.1" 207 0 "-" "cadaver"'
    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    before = log.read_bytes()
    out = tmp_path / "mix.toml"
    out.write_text("# the user's own mix\n")
    assert main(["mix", "from-log", str(log), "-o", str(log)]) == 2
    assert capsys.readouterr().err.strip() == (f"arena: error: -o {log}: is the log {log} (the mix would overwrite "
                                               "what it is made of)")
    assert log.read_bytes() == before
    import arena.app.traffic as traffic

    monkeypatch.setattr(traffic, "mix_toml", lambda built, source: '[[requests]]\nmethod = "CONNECT"\npath = "/"\n')
    assert main(["mix", "from-log", str(log), "-o", str(out)]) == 2
    assert "method" in capsys.readouterr().err and out.read_text() == "# the user's own mix\n"
    monkeypatch.undo()
    assert main(["mix", "from-log", str(log), "-o", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())  # as one line: a long path wraps at 200 columns
    assert f"2 lines skipped (first: {log}:22: a CONNECT request: not a method a mix sends" in said
    assert f"1 line: a CONNECT request: not a method a mix sends (GET, HEAD, POST, PUT, PATCH, DELETE) ({log}:22)" in said
    assert "1 line: a PROPFIND request: not a method a mix sends" in said and f"({log}:41)" in said
    assert {r.method for r in load_mix(out).requests} <= {"GET", "POST"}


def test_compressed_logs_are_read_and_a_cut_har_says_where(tmp_path, capsys):
    import bz2
    import lzma

    lines, _, _ = combined_log(300, seed=5)
    for name, pack in (("access.log.1.bz2", bz2.compress), ("access.log.2.xz", lzma.compress)):
        (tmp_path / name).write_bytes(pack(("\n".join(lines) + "\n").encode()))
        assert main(["mix", "from-log", str(tmp_path / name), "-o", str(tmp_path / "m.toml")]) == 0
        assert "read 300 lines (combined)" in capsys.readouterr().out
    har = json.dumps({"log": {"version": "1.2", "entries": [{"request": {"method": "GET", "url": "http://x/a"}}]}},
                     indent=1)
    (tmp_path / "cut.har").write_text(har[:len(har) // 2])
    assert main(["mix", "from-log", str(tmp_path / "cut.har"), "-o", str(tmp_path / "m.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(r"cut\.har:\d+: not valid JSON: .* at line \d+, column \d+ \(a HAR cut "
                                              r"short\?\)", err), err
    # --fields names a JSON line's keys: given with a combined log, refused (it was silently ignored)
    (tmp_path / "access.log").write_text("\n".join(lines) + "\n")
    assert main(["mix", "from-log", str(tmp_path / "access.log"), "-o", str(tmp_path / "m.toml"),
                 "--fields", "method=verb"]) == 2
    assert (f"--fields method=verb: names a JSON line's keys; {tmp_path}/access.log is a combined log"
            in capsys.readouterr().err)


@pytest.mark.parametrize("argv, text", [
    (["mix", "from-log", "{d}/missing.log", "-o", "{d}/m.toml"], "{d}/missing.log: no such log file"),
    (["mix", "from-log", "{d}/empty.log", "-o", "{d}/m.toml"], "{d}/empty.log: empty: no requests in it"),
    (["mix", "from-log", "{d}/prose.log", "-o", "{d}/m.toml"],
     "{d}/prose.log: not a known log format (combined, common, jsonl, vegeta, har; or give --format): lines 1, 3, 4 "
     "parse as none of them"),
    (["mix", "from-log", "{d}/prose.log", "-o", "{d}/m.toml", "--format", "jsonl", "--fields", "verb=x"],
     "--fields verb=x: 'verb=x' must be FIELD=KEY with FIELD one of method, path, status, time, request"),
    (["mix", "from-log", "{d}/prose.log", "-o", "{d}/m.toml", "--exclude", "("],
     "--exclude (: not a regular expression"),
    (["mix", "from-log", "{d}/health.log", "-o", "{d}/m.toml"],
     "{d}/health.log: 2 requests read, none left to write (static assets 0, health checks 2"),
    (["load", "http://127.0.0.1:9/", "--profile", "{d}/health.log", "--window", "busiest:1h"],
     "--window busiest:1h: 3600s is longer than the log's"),
    (["load", "http://127.0.0.1:9/", "--profile", "{d}/health.log", "--window", "most:1m"],
     "--window most:1m: must be busiest:DURATION or first:DURATION"),
    (["load", "http://127.0.0.1:9/", "--profile", "{d}/health.log", "--speed", "2", "-r", "5"],
     "--speed, --rate: give one"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, text):
    (tmp_path / "empty.log").write_text("\n\n")
    (tmp_path / "prose.log").write_text("It was a dark\n\nand stormy night;\nthe rain fell\n")
    (tmp_path / "health.log").write_text('1.2.3.4 - - [14/Nov/2023:22:13:20 +0000] "GET /healthz HTTP/1.1" 200 2\n' * 2)
    assert main([a.format(d=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and text.format(d=tmp_path) in err
    assert not (tmp_path / "m.toml").exists()


@pytest.mark.integration
def test_a_mix_from_a_log_replays_its_shapes_through_arena_load(tmp_path):
    """from-log's mix sent by arena-load to a server that records what it is asked: every request
    has its template's shape (ids in range, tokens of the log's kinds, drawn afresh), in the log's
    proportions."""
    import re

    lines = []
    for i in range(600):
        if i % 3:
            target = f"/posts/{100 + i % 50}?page={i % 7 + 1}"
        else:
            target = f"/files/{i:08x}-4f89-41d3-9a0c-0305e82c3301/raw"
        lines.append(f'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET {target} HTTP/1.1" 200 5 "-" "curl"')
    (tmp_path / "access.log").write_text("\n".join(lines) + "\n")
    assert main(["mix", "from-log", str(tmp_path / "access.log"), "-o", str(tmp_path / "mix.toml")]) == 0
    with recording_server() as (url, seen):
        assert main(["load", url, "-c", "2", "-n", "300", "--mix", str(tmp_path / "mix.toml")]) == 0
    posts = [p for p in seen if p.startswith("/posts/")]
    files = [p for p in seen if p.startswith("/files/")]
    assert len(posts) + len(files) == len(seen) >= 300
    assert len(files) / len(seen) == pytest.approx(1 / 3, abs=0.08)
    assert all(re.fullmatch(r"/posts/1[0-4][0-9]\?page=[1-7]", p) for p in posts), posts[:5]
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
    assert all(re.fullmatch(f"/files/{uuid}/raw", p) for p in files), files[:5]
    assert len(set(files)) == len(files)  # drawn afresh, not the log's


def bursty_log(seconds: int, seed: int = 4) -> tuple[list[str], list[int]]:
    """A combined log whose requests per second swing: 20 a second, 90 every seventh second, none in
    the 13th; and the counts."""
    rng = random.Random(seed)
    counts = [0 if s == 12 else 90 if s % 7 == 3 else 20 + rng.randint(-5, 5) for s in range(seconds)]
    lines = []
    for s, n in enumerate(counts):
        stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(1_700_000_000 + s))
        lines += [f'10.0.0.1 - - [{stamp}] "GET /posts/{rng.randint(1, 99)} HTTP/1.1" 200 10 "-" "x"'] * n
    return lines, counts


def test_a_profile_keeps_the_logs_seconds_and_bursts_and_scales_to_a_speed_or_a_rate():
    from arena.traffic.profile import schedule

    lines, counts = bursty_log(60)
    times = logs.arrival_times(e for e in logs.read(lines, "combined"))
    s = schedule(times)
    assert s.per_second().tolist() == counts  # spread within each second, never out of it
    assert s.peak() == pytest.approx(float(np.percentile(counts, 99)), rel=0.05)
    assert len(set(s.times.tolist())) == len(s.times)  # not all at the second's start
    fast = schedule(times, speed=10)
    assert fast.span_s == pytest.approx(s.span_s / 10) and len(fast.times) == sum(counts)
    to_rate = schedule(times, rate=500)
    assert to_rate.mean_rate == pytest.approx(500, rel=0.02)
    busiest = schedule(times, window_kind="busiest", window_s=10)  # any 10 s, not only whole seconds
    assert max(sum(counts[i:i + 10]) for i in range(51)) <= len(busiest.times) <= max(
        sum(counts[i:i + 11]) for i in range(50))
    with pytest.raises(ValueError, match="longer than the log"):
        schedule(times, window_kind="first", window_s=3600)


@pytest.mark.alone
def test_a_profile_is_sent_at_its_times_by_arena_load(tmp_path, capsys):
    """A 30-second bursty log at 10x against a recording server: each second of the run sends what
    ten seconds of the log held, within 2%."""
    lines, counts = bursty_log(30)
    (tmp_path / "access.log").write_text("\n".join(lines) + "\n")
    with recording_server() as (url, _):
        assert main(["load", url + "/posts/1", "--profile", str(tmp_path / "access.log"), "--speed", "10x",
                     "--json", str(tmp_path / "r.json")]) == 0
    said = capsys.readouterr().out
    assert f"profile: {sum(counts):,} sends over" in said and "at 10x" in said
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["config"]["arrival"] == "schedule"
    sent = [p["sent"] for p in doc["series"]][:3]
    assert sent == pytest.approx([sum(counts[i:i + 10]) for i in (0, 10, 20)], rel=0.02)
    assert main(["load", "http://127.0.0.1:9/", "--speed", "2"]) == 2
    assert capsys.readouterr().err.strip() == "arena: error: --speed: applies to --profile (a log's arrival times)"


def test_an_experiments_profile_is_read_scaled_to_each_rate_and_refused_where_it_cannot_be(tmp_path):
    from arena.drivers.native import build_argv
    from arena.errors import ArenaError
    from arena.plan.experiment import RunSpec
    from arena.plan.parse import parse_experiment
    from arena.runner import load_spec

    lines, counts = bursty_log(20)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "access.log").write_text("\n".join(lines) + "\n")
    file = str(tmp_path / "e.toml")
    base = {"name": "p", "servers": [{"server": "puma"}], "workload": {"path": "/"}, "duration": "3s", "warmup": "1s"}
    exp = parse_experiment({**base, "load": {"model": "open", "rates": [100], "profile": "logs/access.log",
                                             "window": "first:2s"}}, file)
    assert exp.arrival == "schedule" and exp.profile == (str(tmp_path / "logs" / "access.log"),)
    spec = load_spec(exp, RunSpec(exp.servers[0], exp.levels[0], 1, exp.workloads[0]), "http://127.0.0.1:1")
    times = np.array(spec.schedule)
    # the log's first 2 s (about 40 requests) at a mean 100/s, over and over to cover the warm-up and the run
    assert times[-1] < 4.0 and len(times) == pytest.approx(400, rel=0.03)
    argv = build_argv(spec, tmp_path / "arena-load", tmp_path / "out.json", None, tmp_path / "s.txt")
    assert argv[argv.index("--schedule") + 1] == str(tmp_path / "s.txt") and "-r" not in argv
    for load, where, text in (
            ({"concurrency": [4], "profile": "logs/access.log"}, "load.profile", "applies to model = \"open\""),
            ({"model": "open", "rates": [5], "profile": "logs/none.log"}, "load.profile",
             f"{tmp_path}/logs/none.log: no such log file"),
            ({"model": "open", "rates": [5], "profile": "logs/access.log", "arrival": "poisson"}, "load.arrival",
             "a profile sends at its log's times: give arrival or profile"),
            ({"model": "open", "rates": [5], "profile": "logs/access.log", "window": "busiest"}, "load.window",
             "must be busiest:DURATION or first:DURATION"),
            ({"model": "open", "rates": [5], "window": "first:1m"}, "load.window", "applies to a profile")):
        with pytest.raises(ArenaError) as e:
            parse_experiment({**base, "load": load}, file)
        assert str(e.value).startswith(f"{file}: {where} = ") and text in str(e.value), str(e.value)
    with pytest.raises(ArenaError, match=r'load.profile = "a profile": driver "jmeter": jmeter spaces an open model'):
        parse_experiment({**base, "driver": "jmeter", "load": {"model": "open", "rates": [5],
                                                               "profile": "logs/access.log"}}, file)


def test_a_profile_that_is_no_log_is_refused_before_anything_runs(tmp_path, capsys):
    """A profile is read when its file is checked, not when the first run's load starts: a binary
    file passes no --dry-run (it failed every run as "driver failed"), and tune refuses an empty log
    before it calibrates (it raced for 28 s and stored failed runs), each in one line, exit 2."""
    (tmp_path / "binary.log").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "empty.log").write_text("\n")
    (tmp_path / "p.toml").write_text('name = "p"\nduration = "1s"\n[workload]\npath = "/"\n'
                                     '[load]\nmodel = "open"\nrates = [10]\nprofile = "binary.log"\n'
                                     '[[servers]]\nserver = "gunicorn-sync"\n')
    assert main(["run", str(tmp_path / "p.toml"), "--dry-run", "--store", str(tmp_path / "a.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f'load.profile = "binary.log": {tmp_path}/binary.log: not a known log format' in err
    store = tmp_path / "t.db"
    assert main(["tune", "--servers", "gunicorn-sync", "--cpus", "1", "--p99-max", "200ms", "--store", str(store),
                 "--profile", str(tmp_path / "empty.log")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"arena: error: --profile {tmp_path}/empty.log: empty: no requests in it", err
    assert not store.exists()


@pytest.mark.integration
def test_an_experiment_runs_a_real_server_under_a_profile(tmp_path, capsys):
    from arena.app.storage import results
    from arena.results.store import Store
    from tests.conftest import require_server

    require_server("gunicorn-sync")
    lines, _ = bursty_log(20)
    (tmp_path / "access.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "p.toml").write_text(
        'name = "profiled"\nduration = "2s"\nwarmup = "0.5s"\nrepetitions = 1\nothers_threshold = 1\n'
        'speed_threshold = 10\ndrift_threshold = 10\n'
        '[workload]\npath = "/work?cpu_ms=1"\n'
        '[load]\nmodel = "open"\nrates = [60]\nprofile = "access.log"\n'
        '[[servers]]\nserver = "gunicorn-sync"\nprocesses = 2\n')
    store = str(tmp_path / "a.db")
    assert main(["run", str(tmp_path / "p.toml"), "--store", store]) == 0
    with Store(store) as s:
        [run] = results(s, "profiled").runs
    assert run.valid and run.arrival == "schedule"



def test_a_har_becomes_templates_with_headers_and_bodies_of_the_same_shape_and_no_user_data(tmp_path, capsys):
    def entry(method, url, status, headers=(), mime=None, text=None):
        req = {"method": method, "url": url, "httpVersion": "HTTP/1.1",
               "headers": [{"name": k, "value": v} for k, v in headers], "queryString": [], "cookies": []}
        if text is not None:
            req["postData"] = {"mimeType": mime, "text": text}
        return {"startedDateTime": "2024-05-01T10:00:00.000Z", "time": 12, "request": req,
                "response": {"status": status, "headers": [], "content": {"size": 0}}}

    common = [("Accept", "text/html"), ("Cookie", "sessionid=s3cr3tcookie"), ("Host", "shop.example.com"),
              ("Authorization", "Bearer t0ken"), (":authority", "shop.example.com")]
    entries = [entry("GET", f"https://shop.example.com/posts/{i}", 200, common) for i in (3, 9, 12)]
    entries += [entry("POST", "https://shop.example.com/api/posts", 201,
                      [("Content-Type", "application/json"), ("Cookie", "sessionid=s3cr3tcookie")], "application/json",
                      json.dumps({"title": f"Hello world {i}", "author_id": i, "tags": ["alpha"], "draft": False}))
                for i in (7, 40)]
    entries += [entry("POST", "https://shop.example.com/login", 302,
                      [("Content-Type", "application/x-www-form-urlencoded")], "application/x-www-form-urlencoded",
                      "username=alice&password=hunter22&remember=1")]
    har = tmp_path / "browse.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "test"}, "entries": entries}}, indent=2))
    out = tmp_path / "mix.toml"
    assert main(["mix", "from-log", str(har), "-o", str(out)]) == 0
    assert "read 1 HAR file over 0 s: 6 requests, 0 entries skipped" in capsys.readouterr().out
    mix = load_mix(out)
    by_path = {r.path: r for r in mix.requests}
    assert set(by_path) == {"/posts/{post_id:0..99}", "/api/posts", "/login"}  # 3 values: their digits' range
    assert dict(by_path["/posts/{post_id:0..99}"].headers) == {"Accept": "text/html"}
    assert by_path["/api/posts"].body == ('{"title":"{title:token:14}","author_id":{author_id:0..99},'
                                          '"tags":["{tags:token:5}"],"draft":false}')  # 13.5 characters on average
    assert by_path["/login"].body == "username={username:token:5}&password={password:token:8}&remember={remember:0..9}"
    text = out.read_text()
    for secret in ("s3cr3tcookie", "t0ken", "alice", "hunter22", "Hello", "shop.example.com", "alpha"):
        assert secret not in text, secret


@pytest.mark.integration
def test_a_sessions_capture_feeds_its_next_step_and_one_never_found_is_named(tmp_path, capsys):
    """`arena load --mix` with sessions: a value captured from one answer is in the next request's
    path; a capture never found is an error of its request, named on the output, and the run is
    invalid (exit 1), not a traceback."""
    def session(pattern: str) -> str:
        return ('[[sessions]]\nname = "reader"\n[[sessions.steps]]\npath = "/first"\n'
                f'capture = [{{ name = "v", regex = \'{pattern}\' }}]\n[[sessions.steps]]\npath = "/next/{{v}}"\n')

    (tmp_path / "found.toml").write_text(session("(o)k"))
    (tmp_path / "never.toml").write_text(session("token=([a-z]+)"))
    with recording_server() as (url, seen):
        assert main(["load", url, "-c", "2", "-n", "100", "--mix", str(tmp_path / "found.toml")]) == 0
        firsts, nexts = seen.count("/first"), seen.count("/next/o")
        assert firsts + nexts == len(seen) == 100 and 0 <= firsts - nexts <= 2  # a user may end on a first step
        seen.clear()
        capsys.readouterr()
        assert main(["load", url, "-c", "2", "-n", "40", "--mix", str(tmp_path / "never.toml")]) == 1
    out = capsys.readouterr()
    assert seen == ["/first"] * 40  # every session ended at its first step
    assert "capture 40" in out.out and "session 'reader': capture 'v' not found in 40 answers" in out.out, out.out
    assert "Traceback" not in out.out + out.err
