"""The privacy rule for mixes (docs/reference/apps.md, "What a mix keeps"): a corpus of user data,
placed in paths, queries, headers and bodies of a combined log, a JSON lines log and a HAR, comes
out of `arena mix from-log` in no written mix and no printed line; `--keep-values` keeps it, and
says so. Each value is a request of its own or one of many (a one-time code seen once, a name among
30 users), as in a real log."""

import json
import time
from urllib.parse import quote

import pytest

from arena.cli import main
from arena.mix import load_mix
from arena.traffic.templates import DISTINCT_VALUES, PATH_WORDS, build, digits_range, private
from arena.traffic import logs

EMAILS = ["alice.liddell@example.com", "bob+billing@mail.example.org"]
PHONES = ["+1-555-867-5309", "(555) 123-4567", "+447700900123"]
CARDS = ["4111111111111111", "4111-1111-1111-1111", "5500 0000 0000 0004"]
NATIONAL_IDS = ["078-05-1120", "QQ123456C", "850101-1234567"]
CODES = ["483921", "770213"]  # one-time codes: each seen once
NAMES = ["marguerite", "thaddeus", "ottoline", "percival", "wilhelmina", "bartholomew", "clementine", "ignatius",
         "rosalind", "evander", "araminta", "leopold", "seraphina", "casimir", "philippa", "aurelio", "octavia",
         "benedikt", "ludmila", "florian", "hermione", "valentin", "genevieve", "cornelius", "isadora", "maximilian",
         "ottilie", "rupert", "theodora", "wendeline"]
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
API_KEYS = ["sk_live_4eC39HqLyjWDarjtT1zdp7dc", "AKIAIOSFODNN7EXAMPLE"]
SESSION = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
PASSWORD = "correct horse battery staple"
CORPUS = [*EMAILS, *PHONES, *CARDS, *NATIONAL_IDS, *CODES, *NAMES, JWT, *API_KEYS, SESSION, PASSWORD]


def targets() -> list[str]:
    """Request targets holding the corpus in paths and queries, among ordinary traffic."""
    out = [f"/posts/{i}?page={i % 7 + 1}" for i in range(1, 200)]
    out += [f"/users/{quote(e)}/profile" for e in EMAILS]
    out += [f"/users/{name}/profile" for name in NAMES for _ in range(3)]
    out += [f"/accounts/{quote(p)}/calls" for p in PHONES]
    out += [f"/cards/{quote(c)}/charges?cvv=123" for c in CARDS]
    out += [f"/people/{quote(n)}" for n in NATIONAL_IDS]
    out += [f"/verify?code={c}" for c in CODES] + [f"/otp/{c}" for c in CODES]
    out += [f"/search?q={quote(e)}&name={NAMES[0]}" for e in EMAILS]
    out += [f"/api/data?api_key={k}" for k in API_KEYS] + [f"/auth/{JWT}/refresh", f"/callback?token={JWT}"]
    out += [f"/cart?session={SESSION}", f"/unsubscribe?{quote(EMAILS[0])}", f"/phone/{quote(PHONES[0])}"]
    return out


def combined(tmp_path):
    stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(1_700_000_000))
    lines = [f'10.0.0.{i % 250} - {NAMES[i % len(NAMES)]} [{stamp}] "GET {t} HTTP/1.1" 200 512 "-" '
             f'"Mozilla/5.0 ({EMAILS[0]})"' for i, t in enumerate(targets())]
    path = tmp_path / "access.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def jsonl(tmp_path):
    docs = [{"method": "GET", "path": t, "status": 200, "time": 1_700_000_000 + i, "user": NAMES[i % len(NAMES)],
             "email": EMAILS[i % 2], "remote_ip": "10.0.0.1"} for i, t in enumerate(targets())]
    path = tmp_path / "access.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    return path


def har(tmp_path):
    def entry(method, target, headers=(), mime=None, text=None):
        req = {"method": method, "url": f"https://shop.example.com{target}", "httpVersion": "HTTP/1.1",
               "headers": [{"name": k, "value": v} for k, v in headers], "queryString": [], "cookies": []}
        if text is not None:
            req["postData"] = {"mimeType": mime, "text": text}
        return {"startedDateTime": "2024-05-01T10:00:00.000Z", "time": 12, "request": req,
                "response": {"status": 200, "headers": [], "content": {"size": 0}}}

    private_headers = [("Accept", "application/json"), ("Authorization", f"Bearer {JWT}"),
                       ("Cookie", f"sessionid={SESSION}"), ("X-Api-Key", API_KEYS[0]), ("X-User-Email", EMAILS[1]),
                       ("X-Session-Id", SESSION), ("X-Phone", PHONES[1])]
    entries = [entry("GET", t, private_headers) for t in targets()]
    for i, name in enumerate(NAMES):
        entries.append(entry("POST", "/api/signup", [("Content-Type", "application/json")], "application/json",
                             json.dumps({"email": EMAILS[i % 2], "name": name, "card": int(CARDS[0]), "pin": 4821,
                                         "phone": PHONES[i % 3], "ssn": NATIONAL_IDS[0], EMAILS[0]: True,
                                         "password": PASSWORD, "api_key": API_KEYS[1]})))
        entries.append(entry("POST", "/login", [("Content-Type", "application/x-www-form-urlencoded")],
                             "application/x-www-form-urlencoded",
                             f"email={quote(EMAILS[i % 2])}&password={quote(PASSWORD)}&otp={CODES[0]}"))
    path = tmp_path / "browse.har"
    path.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "t"}, "entries": entries}}))
    return path


def leaked(text: str) -> list[str]:
    """The corpus' values found in ``text``, as they are or percent-encoded."""
    return [v for v in CORPUS if v in text or quote(v) in text or quote(v, safe="") in text]


@pytest.mark.parametrize("make", [combined, jsonl, har], ids=["combined", "jsonl", "har"])
def test_no_user_data_of_the_corpus_is_written_or_printed(tmp_path, capsys, make):
    log = make(tmp_path)
    out = tmp_path / "mix.toml"
    assert main(["mix", "from-log", str(log), "-o", str(out)]) == 0
    said = capsys.readouterr()
    text = out.read_text()
    mix = load_mix(out)  # and what is written is a mix
    assert leaked(text) == [] and leaked(said.out + said.err) == []
    paths = {r.path for r in mix.requests}
    assert any(p.startswith("/users/{user_id:token:") and p.endswith("/profile") for p in paths), paths  # names
    assert "/verify?code={code:100000..999999}" in paths, paths  # a one-time code: its digits, never itself
    # --keep-values is the one way to keep them, and says so
    kept = tmp_path / "kept.toml"
    assert main(["mix", "from-log", str(log), "-o", str(kept), "--keep-values"]) == 0
    assert leaked(kept.read_text())
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["mix", "from-log", "--help"])
    assert "user data: left out by default" in " ".join(capsys.readouterr().out.split())


def test_the_privacy_rules_thresholds_on_known_values():
    for text in [*EMAILS, *PHONES[:2], *CARDS[1:], *NATIONAL_IDS, JWT, quote(EMAILS[0]), quote(PHONES[1])]:
        assert private(text), text
    for text in ("profile", "2024-05-01", "logstash-monitorama-2013", "v2", "12345", "posts", "iphone15"):
        assert not private(text), text
    assert digits_range(483921, 483921) == (100000, 999999) and digits_range(7, 40) == (0, 99)
    # a range from DISTINCT_VALUES values or more is the log's; from fewer, their digits'
    few = [logs.Entry("GET", f"/orders/{n}", 200, None) for n in range(11, 11 + DISTINCT_VALUES - 1)]
    many = [logs.Entry("GET", f"/items/{n}", 200, None) for n in range(11, 11 + DISTINCT_VALUES)]
    assert sorted(t.path for t in build(few + many).kept) == [f"/items/{{item_id:11..{10 + DISTINCT_VALUES}}}",
                                                              "/orders/{order_id:10..99}"]
    # a level of PATH_WORDS words stays words (routes); one more and they are a field
    routes = [logs.Entry("GET", f"/api/r{i}x/list", 200, None) for i in range(PATH_WORDS)]
    assert len(build(routes).kept) == PATH_WORDS
    users = [logs.Entry("GET", f"/u/user{'abcdefghijklmn'[i]}/feed", 200, None) for i in range(PATH_WORDS + 1)]
    assert [(t.path, t.count) for t in build(users).kept] == [("/u/{u_id:token:5}/feed", PATH_WORDS + 1)]
