"""Clients: keep-alive and the emulated link, from experiment files to arena-load's flags and the
report's method; bad values one line naming file, key and value."""

import json
from pathlib import Path

import pytest

from arena.drivers.native import build_argv
from arena.drivers.spec import LoadSpec
from arena.errors import ArenaError
from arena.clients import KEYS, Clients, parse_rate, rate_text
from arena.results.run_setup import LoadSettings
from arena.plan.expand import plan
from arena.plan.parse import parse_experiment, workloads_of
from arena.plan.stored import stored_experiment
from arena.report.data import clients_note
from arena.runner import load_spec

ROOT = Path(__file__).resolve().parent.parent
BASE = {"name": "c", "servers": [{"server": "puma", "app": "rack"}], "load": {"concurrency": [2]}}


@pytest.mark.parametrize("given, bps", [("64KiB/s", 65536), ("1.5MB/s", 1_500_000), ("256 KiB", 262144),
                                        (2000, 2000), ("10B/s", 10), ("1GiB/s", 1 << 30)])
def test_rates_read_as_bytes_per_second(given, bps):
    assert parse_rate(given) == bps


@pytest.mark.parametrize("given", ["fast", 0, "0.5B/s", "1Kb/s", True, "-1KB/s", None])
def test_what_is_not_a_rate(given):
    assert parse_rate(given) is None


def test_a_set_of_clients_names_itself():
    assert Clients().text == "keep-alive"
    assert not Clients().link
    slow = Clients(keep_alive=False, delay_s=0.05, upload_bps=65536, download_bps=1_500_000)
    assert slow.link and slow.text == "a connection per request, 50 ms away, 64 KiB/s up, 1.5 MB/s down"
    assert rate_text(1000) == "1 KB/s" and rate_text(1234) == "1234 B/s" and rate_text(3 << 20) == "3 MiB/s"


def test_clients_come_from_the_table_and_each_workload_may_have_its_own():
    exp = parse_experiment({**BASE, "keep_alive": False, "clients": {"delay": "20ms", "download": "256KiB/s"},
                            "workloads": [{"name": "far", "path": "/a"},
                                          {"name": "near", "path": "/a", "clients": {"delay": 0, "keep_alive": True}},
                                          {"name": "slow-up", "path": "/a", "clients": {"upload": "8KiB/s"}}]},
                           "x.toml")
    far, near, up = exp.workloads
    assert far.clients == Clients(False, 0.02, None, 262144)
    assert near.clients == Clients(True, 0.0, None, 262144)
    assert up.clients == Clients(False, 0.02, 8192, 262144)
    # the stored definition reads back the same
    assert {n: w.clients for n, w in workloads_of(exp.source).items()} == {w.name: w.clients for w in exp.workloads}
    # each run's load carries its workload's clients
    runs = {r.workload.name: load_spec(exp, r, "http://127.0.0.1:1") for g in plan(exp) for r in g.runs}
    assert (runs["far"].keep_alive, runs["far"].delay_s, runs["far"].download_bps) == (False, 0.02, 262144)
    assert (runs["near"].keep_alive, runs["near"].delay_s) == (True, 0.0)
    argv = build_argv(runs["slow-up"], Path("/bin/arena-load"), Path("/tmp/o.json"))
    assert argv[argv.index("--delay") + 1] == "20000us" and argv[argv.index("--upload") + 1] == "8192"
    assert argv[argv.index("--download") + 1] == "262144" and "--no-keepalive" in argv
    plain = build_argv(LoadSpec(url="http://127.0.0.1:1/"), Path("/bin/arena-load"), Path("/tmp/o.json"))
    assert not {"--delay", "--upload", "--download"} & set(plain)


@pytest.mark.parametrize("data, message", [
    ({"clients": {"delay": "1h"}}, 'x.toml: clients.delay = "1h": must be a duration such as "10s", "500ms", "2m" or a '
                                    'number of seconds, at most 60s'),
    ({"clients": {"download": "fast"}}, 'x.toml: clients.download = "fast": must be bytes per second such as "64KiB/s"'),
    ({"clients": {"lag": "1s"}}, 'x.toml: clients.lag = "1s": unknown key (allowed: delay, download, keep_alive, upload)'),
    ({"clients": {"keep_alive": "no"}}, 'x.toml: clients.keep_alive = "no": must be true or false'),
    ({"clients": 5}, "x.toml: clients = 5: must be a [clients] table"),
    ({"workloads": [{"name": "w", "clients": {"upload": 0}}]}, "x.toml: workloads[0].clients.upload = 0: must be bytes"),
    ({"workload": {"path": "/", "clients": {}}}, "x.toml: workload.clients = {}: unknown key"),
    ({"driver": "wrk", "clients": {"delay": "5ms"}}, 'x.toml: clients = "a slow or far client": driver "wrk": wrk cannot '
                                                     'emulate slow or far clients (delay, upload, download) (drivers '
                                                     'that can: arena-load)'),
])
def test_bad_clients_are_one_line(data, message):
    with pytest.raises(ArenaError) as e:
        parse_experiment({**BASE, **data}, "x.toml")
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)


def test_a_load_result_says_which_clients_it_stood_for():
    def clients(config):
        s = LoadSettings.of(config)
        return Clients(s.keep_alive, s.link_delay_s, s.upload_bps, s.download_bps)

    assert clients({"keep_alive": True, "link": None}) == Clients()
    assert clients({"keep_alive": True, "link": {"delay_ms": 20.0, "upload_bps": None, "download_bps": 4096}}) \
        == Clients(True, 0.02, None, 4096)
    assert clients({}) == Clients()  # another driver's config
    assert LoadSettings.of({"arrival": "poisson", "interval_s": 0.5}) == LoadSettings(arrival="poisson", interval_s=0.5)


def test_the_method_names_the_clients_of_each_workload():
    fast = clients_note(stored_experiment("e", "", {"workload": {"path": "/"}}))
    assert fast == "Clients: keep-alive."
    mixed = clients_note(stored_experiment("e", "", {"workloads": [
        {"name": "fast", "path": "/"}, {"name": "slow", "path": "/", "clients": {"delay": "50ms", "download": "64KiB/s"}}]}))
    assert mixed.startswith("Clients: fast: keep-alive; slow: keep-alive, 50 ms away, 64 KiB/s down. Slow and far "
                            "clients are emulated by arena-load per connection")


def test_the_schema_knows_every_clients_key():
    schema = json.loads((ROOT / "schemas" / "experiment.schema.json").read_text())
    assert set(schema["$defs"]["clients"]["properties"]) == set(KEYS)
    assert schema["$defs"]["named_workload"]["properties"]["clients"]["$ref"] == "#/$defs/clients"
