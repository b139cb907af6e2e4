"""Experiment files: good files become a typed plan; bad ones one line naming file, key, value."""

import tomllib
import os
import re
from pathlib import Path

import pytest

from arena.errors import ArenaError
from arena.plan.expand import plan
from arena.plan.experiment import Level, ServerConfig
from arena.plan.parse import default_layout, load_experiment, parse_experiment

ROOT = Path(__file__).resolve().parent.parent
GOOD = {"name": "t", "servers": [{"server": "puma", "app": "rack", "processes": [1, 2], "threads": [1, 5]}],
        "load": {"concurrency": [1, 10]}, "repetitions": 2}


def parse(data):
    return parse_experiment(data, "x.toml")


def test_a_grid_expands_into_configurations():
    exp = parse(GOOD)
    assert [c.key for c in exp.servers] == ["puma[rack] p=1 t=1", "puma[rack] p=1 t=5", "puma[rack] p=2 t=1",
                                            "puma[rack] p=2 t=5"]
    assert exp.levels == (Level("closed", 1), Level("closed", 10))
    assert (exp.duration_s, exp.warmup_s, exp.driver, exp.repetitions) == (10.0, 2.0, "arena-load", 2)
    assert not set(exp.server_cpus) & set(exp.load_cpus)


def test_every_shipped_scenario_is_valid():
    for path in (ROOT / "scenarios").glob("*.toml"):
        exp = load_experiment(path)
        assert exp.servers and exp.levels, path


def test_quick_has_six_configurations_across_ruby_and_python():
    exp = load_experiment(ROOT / "scenarios" / "quick.toml")
    assert len(exp.servers) >= 6
    assert {"puma", "unicorn"} & {c.server for c in exp.servers} and {"uvicorn"} & {c.server for c in exp.servers}


def test_plan_groups_levels_per_server_start_and_shuffles_groups():
    exp = parse(GOOD)
    groups = plan(exp)
    assert len(groups) == 4 * 2  # configurations x repetitions
    assert all([r.level.value for r in g.runs] == [1, 10] for g in groups)
    assert len({r.key for g in groups for r in g.runs}) == 16  # every run has its own key
    assert plan(exp) == groups  # the seed fixes the order
    ordered = [(c, rep) for rep in (1, 2) for c in exp.servers]
    assert [(g.config, g.repetition) for g in groups] != ordered  # shuffled
    assert sorted((g.config.key, g.repetition) for g in groups) == sorted((c.key, rep) for c, rep in ordered)
    no_reuse = parse({**GOOD, "reuse_server": False})
    assert all(len(g.runs) == 1 for g in plan(no_reuse)) and len(plan(no_reuse)) == 16


def test_open_model_rates():
    exp = parse({**GOOD, "load": {"model": "open", "rates": [100, 250.5]}})
    assert exp.levels == (Level("open", 100.0), Level("open", 250.5)) and exp.levels[1].key == "r=250.5"


@pytest.mark.parametrize("change, message", [
    ({"bogus": 1}, 'x.toml: bogus = 1: unknown key (allowed: '),
    ({"driver": "jmeterx"}, "x.toml: driver = \"jmeterx\": must be 'arena-load' or 'ab' or 'wrk' or 'siege' or 'jmeter'"),
    ({"duration": "soon"}, 'x.toml: duration = "soon": must be a duration such as "10s"'),
    ({"repetitions": 0}, "x.toml: repetitions = 0: must be a whole number from 1 to 100"),
    ({"servers": []}, "x.toml: servers = []: must be one or more [[servers]] tables"),
    ({"servers": [{"server": "nginx"}]}, 'x.toml: servers[0].server = "nginx": unknown server (servers: webrick,'),
    ({"servers": [{"server": "puma", "app": "flask"}]}, 'x.toml: servers[0].app = "flask": puma cannot serve it'),
    ({"servers": [{"server": "unicorn", "threads": 4}]},
     "x.toml: servers[0].threads = 4: unicorn serving rack has no threads knob (its knobs: processes)"),
    ({"servers": [{"server": "puma", "threads": [1, 0]}]}, "x.toml: servers[0].threads[1] = 0: must be a whole number from 1"),
    ({"thresholds": ["p99 < 200ms", 42]}, "x.toml: thresholds[1] = 42: "),
    ({"load": {"model": "open"}}, "x.toml: load.rates = (none): must be a number of requests per second above 0"),
    ({"load": {"model": "closed", "rates": [5]}}, 'x.toml: load.rates = [5]: applies to model = "open"'),
    ({"load": {"model": "burst"}}, "x.toml: load.model = \"burst\": must be 'closed' or 'open'"),
    ({"workload": {"path": "work"}}, 'x.toml: workload.path = "work": must start with /'),
    ({"layout": {"server_cpus": "0"}}, 'x.toml: server_cpus = "0": set both server_cpus and load_cpus, or neither'),
    ({"layout": {"server_cpus": "0", "load_cpus": "0"}}, 'x.toml: layout.load_cpus = "0": must not overlap server_cpus'),
    ({"layout": {"server_cpus": "0", "load_cpus": "99"}}, 'x.toml: layout.load_cpus = "99": CPU 99 is not available'),
    ({"layout": {"server_cpus": "1", "load_cpus": "0", "service_cpus": "0"}},
     'x.toml: layout.service_cpus = "0": must not overlap load_cpus'),
    ({"layout": {"server_cpus": "1", "load_cpus": "0", "service_cpus": "99"}},
     'x.toml: layout.service_cpus = "99": CPU 99 is not available'),
    ({"servers": [{"server": "unicorn", "loop": "uvloop"}]},
     'x.toml: servers[0].loop = "uvloop": unicorn has no setting loop (its settings: preload, yjit, malloc_arena_max, '),
    ({"servers": [{"server": "puma", "preload": "yes"}]},
     "x.toml: servers[0].preload = \"yes\": must be true or false (puma's preload), or a list of them"),
    ({"servers": [{"server": "puma", "keepalive_timeout": [5, -1]}]},
     "x.toml: servers[0].keepalive_timeout[1] = -1: must be a whole number of seconds from 0 to 86400"),
    ({"servers": [{"server": "puma", "env": {"RUBYOPT": 1}}]},
     'x.toml: servers[0].env.RUBYOPT = 1: a variable\'s value is a string (quote numbers: "1")'),
    ({"servers": [{"server": "puma", "env": {"HOME": "/root"}}]},
     'x.toml: servers[0].env.HOME = "/root": HOME is set by Arena for every server'),
    ({"servers": [{"server": "puma", "env": "RUBYOPT=-W0"}]},
     'x.toml: servers[0].env = "RUBYOPT=-W0": must be a table of variables'),
    ({"servers": [{"server": "puma", "options": "--preload"}]},
     'x.toml: servers[0].options = "--preload": must be a list of the server\'s flags'),
    ({"workload": {"path": "/", "expect_status": "204-200"}},
     'x.toml: workload.expect_status = "204-200": a range runs from the lower status to the higher'),
    ({"workload": {"path": "/"}, "workloads": [{"name": "a"}]},
     'x.toml: workloads = [{"name": "a"}]: give [workload] or [[workloads]], not both'),
    ({"goal": {"p99": "1s"}}, 'x.toml: goal.p99 = "1s": unknown key (allowed: error_max, event_gap_p99_max, '
                              'first_event_p99_max, memory_max, p99_max, threshold)'),
    ({"goal": {"first_event_p99_max": "0ms"}}, 'x.toml: goal.first_event_p99_max = "0ms": must be above 0'),
    ({"workload": {"path": "/stream", "events": 0}}, "x.toml: workload.events = 0: must be a whole number of events from 1 to 100000"),
    ({"servers": [{"server": "puma", "cpu_limit": 0}]},
     "x.toml: servers[0].cpu_limit = 0: must be a number of cores above 0 and at most this machine's"),
    ({"servers": [{"server": "puma", "cpu_limit": [0.5, 999]}]},
     "x.toml: servers[0].cpu_limit[1] = 999: must be a number of cores above 0 and at most this machine's"),
    ({"servers": [{"server": "puma", "cpu_limit": 1, "cpu_period": "2s"}]},
     'x.toml: servers[0].cpu_period = "2s": must be a duration from 1ms to 1s, such as "100ms", or a list of them'),
    ({"servers": [{"server": "puma", "cpu_period": "50ms"}]},
     'x.toml: servers[0].cpu_period = "50ms": is the period of cpu_limit: give cpu_limit too'),
    ({"servers": [{"server": "puma", "memory_limit": "lots"}]},
     'x.toml: servers[0].memory_limit = "lots": must be a size of at least 6MiB (the smallest a container runtime '
     'sets) such as "512MiB" or "1GiB", or "none"'),
    # what the kernel cannot apply is refused, never lifted and stored as asked (issue: a quota raised silently)
    ({"servers": [{"server": "puma", "cpu_limit": 0.5, "cpu_period": "1ms"}]},
     "x.toml: servers[0].cpu_limit = 0.5: is 0.5 ms of CPU time a 1 ms period, below the kernel's smallest quota of "
     "1 ms a period: at least 1 cores with this period"),
    ({"servers": [{"server": "puma", "cpu_limit": 0.0001}]},
     "x.toml: servers[0].cpu_limit = 0.0001: is 0.01 ms of CPU time a 100 ms period, below the kernel's smallest "
     "quota of 1 ms a period: at least 0.01 cores with this period"),
    ({"servers": [{"server": "puma", "memory_limit": "1KiB"}]},  # no server starts under it
     'x.toml: servers[0].memory_limit = "1KiB": must be a size of at least 6MiB'),
])
def test_bad_files_name_the_file_key_value_and_what_is_allowed(change, message):
    if "layout" in change and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    with pytest.raises(ArenaError) as e:
        parse({**GOOD, **change})
    assert str(e.value).startswith(message.replace("x.toml: server_cpus", "x.toml: layout.server_cpus")), str(e.value)
    assert "\n" not in str(e.value)


def test_limits_are_grid_axes_and_part_of_a_configurations_name():
    """cpu_limit, cpu_period and memory_limit: each a value or a list, every combination a
    configuration, named as deployed ("cpu=0.5 mem=256MiB"); "none" is no limit."""
    from arena.limits import Limits

    exp = parse({**GOOD, "servers": [{"server": "puma", "processes": 2, "threads": 4, "cpu_limit": [0.5, "none"],
                                      "memory_limit": "256MiB"}]})
    assert [c.key for c in exp.servers] == ["puma[rack] p=2 t=4 cpu=0.5 mem=256MiB", "puma[rack] p=2 t=4 mem=256MiB"]
    assert exp.servers[0].limits == Limits(0.5, 0.1, 256.0) and exp.servers[1].limits == Limits(None, 0.1, 256.0)
    periods = parse({**GOOD, "servers": [{"server": "puma", "cpu_limit": 1.5, "cpu_period": ["100ms", "20ms"]}]})
    assert [c.key for c in periods.servers] == ["puma[rack] cpu=1.5", "puma[rack] cpu=1.5/20ms"]
    assert [c.key for c in parse(GOOD).servers] == [c.key for c in parse({**GOOD}).servers]  # none: names unchanged
    assert all(not c.limits.any for c in parse(GOOD).servers)


def test_unreadable_files(tmp_path):
    with pytest.raises(ArenaError, match="nope.toml: no such experiment file"):
        load_experiment(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(ArenaError, match="bad.toml: not valid TOML"):
        load_experiment(bad)


def test_cpus_used_on_other_hosts_are_checked_there_not_here():
    beyond = str(max(os.sched_getaffinity(0)) + 1000)  # no CPU of this machine
    layout = {"layout": {"server_cpus": beyond, "load_cpus": str(int(beyond) + 1)}}
    cluster = {"address": "tcp://10.0.0.1:8786", "server": "worker"}
    exp = parse({**GOOD, **layout, "cluster": cluster})  # the server's on its worker, the load's on the load hosts
    assert (exp.server_cpus, exp.load_cpus) == ((int(beyond),), (int(beyond) + 1,))
    with pytest.raises(ArenaError, match=rf'^x.toml: layout.server_cpus = "{beyond}": CPU {beyond} is not available'):
        parse_experiment({**GOOD, **layout, "cluster": cluster}, "x.toml", server_here=True)  # read on the worker
    with pytest.raises(ArenaError, match=rf'^x.toml: layout.server_cpus = "{beyond}": CPU {beyond} is not available'):
        parse({**GOOD, **layout, "cluster": {**cluster, "server": "here"}})  # the server here, the load there
    mine = str(min(os.sched_getaffinity(0)))
    here = {"layout": {"server_cpus": mine, "load_cpus": beyond}, "cluster": {**cluster, "server": "here"}}
    assert parse({**GOOD, **here}).load_cpus == (int(beyond),)
    with pytest.raises(ArenaError, match=r'^x.toml: layout.server_cpus = "1-0": must be a CPU list such as 0'):
        parse({**GOOD, "layout": {"server_cpus": "1-0", "load_cpus": "2"}, "cluster": cluster})  # the form still


def test_default_layout_never_overlaps():
    assert default_layout([0, 1]) == ((1,), (0,))
    assert default_layout(list(range(8))) == ((2, 3, 4, 5, 6, 7), (0, 1))
    with pytest.raises(ArenaError, match="layout: this machine has one CPU"):
        default_layout([0])


def test_labels():
    exp = parse({**GOOD, "servers": [{"server": "puma", "label": "Puma 5x2", "processes": 2, "threads": 5}]})
    assert exp.servers == (ServerConfig("puma", "rack", 2, 5, None, "Puma 5x2"),) and exp.servers[0].name == "Puma 5x2"


def test_one_configuration_under_two_labels_runs_twice_as_an_aa_test():
    twice = [{"server": "puma", "label": label, "processes": 1, "threads": 2} for label in ("A", "A'")]
    exp = parse({**GOOD, "servers": twice})
    assert [c.name for c in exp.servers] == ["A", "A'"] and all(c.twin for c in exp.servers)
    keys = [r.key for g in plan(exp) for r in g.runs]
    assert len(keys) == len(set(keys)) == 2 * 2 * exp.repetitions  # two cells per level, never merged
    with pytest.raises(ArenaError, match=r"servers = \"puma\[rack\] p=1 t=2\": is the same configuration as 'A': "
                                         "give each a label"):
        parse({**GOOD, "servers": [twice[0], {"server": "puma", "processes": 1, "threads": 2}]})
    # a configuration without a twin keeps its key (stores run before twins existed still resume)
    assert parse({**GOOD, "servers": twice[:1]}).servers[0].key == "puma[rack] p=1 t=2"


def test_several_workloads_multiply_the_runs_and_name_them():
    exp = parse({**GOOD, "workloads": [{"name": "50/250", "path": "/work?cpu_ms=50&io_ms=250"},
                                       {"name": "100/1", "path": "/work?cpu_ms=100&io_ms=1"}]})
    assert [w.name for w in exp.workloads] == ["50/250", "100/1"]
    groups = plan(exp)
    assert len(groups) == 8 and all(len(g.runs) == 4 for g in groups)  # 2 workloads x 2 levels per start
    keys = {r.key for g in groups for r in g.runs}
    assert len(keys) == 32 and "puma[rack] p=1 t=1 50/250 c=10 #2" in keys
    with pytest.raises(ArenaError, match="each workload needs its own name"):
        parse({**GOOD, "workloads": [{"name": "a", "path": "/x"}, {"name": "a", "path": "/y"}]})
    with pytest.raises(ArenaError, match=r"give \[workload\] or \[\[workloads\]\], not both"):
        parse({**GOOD, "workload": {"path": "/x"}, "workloads": [{"name": "a", "path": "/y"}]})


def test_every_scenario_fits_its_time_budget():
    from arena.model.estimate import estimate_s

    for path in (ROOT / "scenarios").glob("*.toml"):
        exp = load_experiment(path)
        budget = 5 * 60 if exp.name == "quick" else 30 * 60
        assert estimate_s(exp) < budget, f"{path.name}: about {estimate_s(exp) / 60:.0f} min"
        assert f"about {round(estimate_s(exp) / 60)} minutes" in path.read_text() or exp.name == "quick", path.name


def test_shipped_scenarios_match_the_experiment_schema():
    import json
    import tomllib

    import jsonschema

    schema = json.loads((ROOT / "schemas" / "experiment.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for path in (ROOT / "scenarios").glob("*.toml"):
        errors = [e.message for e in validator.iter_errors(tomllib.loads(path.read_text()))]
        assert errors == [], (path.name, errors)
    bad = {"servers": [{"server": "puma", "threads": 0}], "workload": {"path": "x"}, "bogus": 1}
    assert len(list(validator.iter_errors(bad))) >= 3


def test_a_driver_is_refused_at_parse_time_for_what_it_cannot_run(tmp_path):
    """Driver capabilities are data: an open-model rate with wrk is refused when the file is read,
    in one line naming the file, the key, the value and the drivers that can."""
    base = {"name": "x", "workload": {"path": "/"}, "servers": [{"server": "puma"}]}
    with pytest.raises(ArenaError) as e:
        parse_experiment({**base, "driver": "wrk", "load": {"model": "open", "rates": [100]}}, "w.toml")
    assert str(e.value) == ('w.toml: load.model = "open": driver "wrk": wrk has only the closed model '
                            '(load.model = "closed") (drivers that can: arena-load, jmeter)')
    with pytest.raises(ArenaError, match=r'^s.toml: requests = "a request count": driver "wrk": this driver runs '
                                         r'for a duration'):
        parse_experiment({**base, "driver": "wrk", "requests": 100}, "s.toml")
    with pytest.raises(ArenaError, match=r'^a.toml: workload.method = "POST": driver "ab": method POST is not '
                                         r'supported by this driver \(it sends GET/HEAD requests only\)'):
        parse_experiment({**base, "driver": "ab", "workload": {"path": "/", "method": "POST"}}, "a.toml")
    with pytest.raises(ArenaError, match=r'^k.toml: keep_alive = false: driver "wrk"'):
        parse_experiment({**base, "driver": "wrk", "keep_alive": False}, "k.toml")
    assert parse_experiment({**base, "driver": "jmeter", "load": {"model": "open", "rates": [5]}}, "j.toml").driver == "jmeter"


def test_an_open_models_arrivals_are_read_checked_against_the_driver_and_sent(tmp_path):
    """``[load] arrival = "poisson"`` reaches arena-load's command line; a driver that paces evenly
    (JMeter's timer), a closed model and a workload's own load refuse it in one line each."""
    from arena.drivers.native import build_argv
    from arena.plan.experiment import RunSpec
    from arena.runner import load_spec

    base = {"name": "x", "workload": {"path": "/"}, "servers": [{"server": "puma"}]}
    exp = parse_experiment({**base, "load": {"model": "open", "rates": [50], "arrival": "poisson"}}, "p.toml")
    assert exp.arrival == "poisson"
    spec = load_spec(exp, RunSpec(exp.servers[0], exp.levels[0], 1, exp.workloads[0]), "http://127.0.0.1:1")
    argv = build_argv(spec, tmp_path / "arena-load", tmp_path / "out.json")
    assert argv[argv.index("--arrival") + 1] == "poisson"
    assert parse_experiment({**base, "load": {"model": "open", "rates": [50]}}, "c.toml").arrival == "constant"
    with pytest.raises(ArenaError) as e:
        parse_experiment({**base, "driver": "jmeter", "load": {"model": "open", "rates": [5], "arrival": "poisson"}},
                         "j.toml")
    assert str(e.value) == ('j.toml: load.arrival = "poisson": driver "jmeter": jmeter spaces an open model\'s '
                            'requests with arrival = "constant" only (drivers that can: arena-load)')
    with pytest.raises(ArenaError, match=r'^k.toml: load.arrival = "poisson": applies to model = "open"'):
        parse_experiment({**base, "load": {"concurrency": [2], "arrival": "poisson"}}, "k.toml")
    with pytest.raises(ArenaError, match=r"^w.toml: workloads\[0\].load.arrival = \"poisson\": applies to the "
                                         r"experiment's \[load\] only"):
        parse_experiment({"name": "x", "servers": [{"server": "puma"}], "workloads": [{"name": "a", "path": "/", "load": {
            "model": "open", "rates": [5], "arrival": "poisson"}}]}, "w.toml")
    with pytest.raises(ArenaError, match=r'^b.toml: load.arrival = "burst": must be \'constant\' or \'poisson\''):
        parse_experiment({**base, "load": {"model": "open", "rates": [5], "arrival": "burst"}}, "b.toml")


def test_arena_run_dry_run_refuses_wrk_with_a_rate_in_one_line(tmp_path, capsys):
    from arena.cli import main

    f = tmp_path / "wrk-open.toml"
    f.write_text('driver = "wrk"\n[load]\nmodel = "open"\nrates = [50]\n[[servers]]\nserver = "puma"\n')
    assert main(["run", str(f), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f'{f}:3: load.model = "open": driver "wrk"' in err  # line 3 holds it


def test_the_schema_names_every_server_setting_the_catalog_has():
    """The experiment schema is written by hand: it must not lag behind the catalog's settings."""
    import json

    from arena.servers import catalog

    schema = json.loads((ROOT / "schemas" / "experiment.schema.json").read_text())
    props = schema["properties"]["servers"]["items"]["properties"]
    names = {o for s in catalog.CATALOG.values() for o in catalog.options_for(s)}
    assert names <= set(props), names - set(props)


def test_settings_env_and_options_are_grid_axes_shown_in_the_configurations_name():
    exp = parse({**GOOD, "servers": [{"server": "puma", "processes": 2, "preload": [False, True], "yjit": [False, True],
                                      "env": {"MALLOC_ARENA_MAX": ["2", "4"]}, "options": [["--backlog", "64"]]}]})
    keys = [c.key for c in exp.servers]
    assert len(keys) == 8 == len(set(keys))
    assert "puma[rack] p=2 preload=true yjit=false MALLOC_ARENA_MAX=4 options='--backlog 64'" in keys
    c = next(c for c in exp.servers if c.key.startswith("puma[rack] p=2 preload=true yjit=true MALLOC_ARENA_MAX=2"))
    assert dict(c.settings) == {"preload": True, "yjit": True} and dict(c.env) == {"MALLOC_ARENA_MAX": "2"}
    assert c.options == ("--backlog", "64")
    # written in any order, a configuration has one name: the server's order of settings
    other = parse({**GOOD, "servers": [{"server": "puma", "yjit": True, "preload": True}]})
    assert other.servers[0].key == "puma[rack] preload=true yjit=true"
    # without settings a configuration's name is what it always was (stored runs are keyed by it)
    assert parse({**GOOD, "servers": [{"server": "puma", "threads": 4}]}).servers[0].key == "puma[rack] t=4"


def test_a_label_keeps_the_settings_that_tell_its_configurations_apart():
    exp = parse({**GOOD, "servers": [{"server": "unicorn", "label": "Unicorn", "preload": [False, True]}]})
    assert [c.name for c in exp.servers] == ["Unicorn preload=false", "Unicorn preload=true"]


def test_the_schema_names_every_topology_key():
    import json

    from arena.topology import KEYS

    schema = json.loads((ROOT / "schemas" / "experiment.schema.json").read_text())
    assert set(schema["$defs"]["topology"]["properties"]) == set(KEYS)
    assert schema["properties"]["servers"]["items"]["properties"]["topology"] == {"$ref": "#/$defs/topology"}


def test_a_workload_may_have_its_own_load():
    """A steady open load beside rising closed levels, in one experiment: each workload's levels
    are its own or the experiment's; the driver is asked about each workload's model."""
    data = {"name": "k", "servers": [{"server": "puma"}], "load": {"concurrency": [4, 12]},
            "workloads": [{"name": "closed", "path": "/"},
                          {"name": "steady", "path": "/", "load": {"model": "open", "rates": [70]}}]}
    exp = parse(data)
    runs = [r for g in plan(exp) for r in g.runs]
    assert sorted(r.key.split(" ", 1)[1] for r in runs if r.repetition == 1) == [
        "closed c=12 #1", "closed c=4 #1", "steady r=70 #1"]
    with pytest.raises(ArenaError) as e:
        parse({**data, "workloads": [{"name": "w", "path": "/", "load": {"model": "open", "rates": [0]}}]})
    assert str(e.value) == ("x.toml: workloads[0].load.rates = [0]: must be a number of requests per second above 0, "
                            "or a list of them")
    with pytest.raises(ArenaError, match=r'^x.toml: workloads\[1\].load.model = "open": driver "wrk"'):
        parse({**data, "driver": "wrk"})


def test_the_schema_is_the_check_of_shape_and_the_catalog_says_a_servers_own_bounds():
    """One validation: the schema refuses what it can say (a key, a type, a pattern, a range); under
    a server's knobs and settings its problem waits for the reader, which says the server's own bound."""
    from arena.plan import schema

    with pytest.raises(ArenaError, match=r'^x.toml: load.rates = \[-5\]: must be a number of requests per second'):
        schema.check({**GOOD, "load": {"model": "open", "rates": [-5]}}, "x.toml")
    later = schema.check({**GOOD, "servers": [{"server": "puma", "threads": 0}]}, "x.toml")
    assert later is not None and later.where == "servers[0].threads"  # the schema's own bound is 4096
    with pytest.raises(ArenaError, match=r"^x.toml: servers\[0\].threads = 0: must be a whole number from 1 to 1024"):
        parse({**GOOD, "servers": [{"server": "puma", "threads": 0}]})
    assert schema.check(GOOD, "x.toml") is None


def test_a_problem_names_the_line_that_holds_its_key(tmp_path):
    from arena.plan.reader import keys_of, locate

    text = ('name = "x"\n[load]\nconcurrency = [1, 0]\n\n[[servers]]\nserver = "puma"\n\n[[servers]]\n'
            'server = "unicorn"\n"threads" = 4\ntopology = { proxy = "nginx" }\n[servers.app]\nrack = "config.ru"\n'
            '[[workloads]]\nname = "a"\n[workloads.load]\nrates = [1]\n')
    lines = {w: locate(text, keys_of(w)) for w in ("load.concurrency", "servers[1].threads", "servers[1].topology.proxy",
                                                  "servers[1].app.rack", "servers[0].label", "servers", "name",
                                                  "workloads[0].load.rates", "nope")}
    assert lines == {"load.concurrency": 3, "servers[1].threads": 10, "servers[1].topology.proxy": 11,
                     "servers[1].app.rack": 13, "servers[0].label": 5, "servers": 5, "name": 1,
                     "workloads[0].load.rates": 17, "nope": None}
    f = tmp_path / "x.toml"
    f.write_text('[[servers]]\nserver = "puma"\n\n[[servers]]\nserver = "unicorn"\nthreads = 4\n')
    with pytest.raises(ArenaError, match=rf"^{re.escape(str(f))}:6: servers\[1\].threads = 4: unicorn serving rack has no"):
        load_experiment(f)


def test_a_goal_written_as_a_table_reads_back_as_the_same_goal():
    """arena tune stores its goal in the experiment it runs (goal_table): [goal] must read back as the
    Goal it was made from, or the search and show would judge by another."""
    from arena.plan.parse import goal_of, goal_table
    from arena.results.answer import Goal

    assert goal_table(Goal(200.0, None, 1.0)) == {"p99_max": 0.2, "error_max": 0.01}  # typed: seconds, a share
    for goal in (Goal(200.0, None, 1.0), Goal(0.5, 2048.0, 0.1), Goal(123.456789, 0.25, 2.5, threshold=0.1),
                 Goal(None, 512.0, None), Goal(), Goal(1e-3, 1e-4, 1e-5), Goal(100.0, first_event_ms=200.0, event_gap_ms=80.0)):
        back = goal_of({"goal": goal_table(goal)})
        assert back.threshold == goal.threshold and back.memory_mib == goal.memory_mib, goal
        for mine, read in ((goal.p99_ms, back.p99_ms), (goal.error_pct, back.error_pct),
                           (goal.first_event_ms, back.first_event_ms), (goal.event_gap_ms, back.event_gap_ms)):
            assert mine == read or mine == pytest.approx(read, rel=1e-12), goal  # ms and % read through s and shares


def test_an_experiment_read_from_a_file_knows_its_resolved_path(tmp_path, monkeypatch):
    """The store keeps the path the file was read from resolved, so its app and mix paths resolve
    from any directory later (recommend --verify, the report); one no file holds has none."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "e.toml").write_text((ROOT / "scenarios" / "quick.toml").read_text())
    monkeypatch.chdir(tmp_path)
    exp = load_experiment("sub/e.toml")
    assert exp.file == "sub/e.toml" and exp.path == str(tmp_path / "sub" / "e.toml")
    assert parse_experiment(dict(exp.source), "arena tune").path == ""


def test_a_stored_definition_is_decoded_once_and_what_cannot_be_read_is_left_at_its_default():
    """A stored definition decodes into a StoredExperiment (plan/stored.py); a part this Arena cannot
    read (a goal key of a later Arena, an app moved away) leaves that part empty, never an error."""
    from arena.plan.stored import stored_experiment
    from arena.results.answer import Goal

    data = tomllib.loads((ROOT / "scenarios" / "quick.toml").read_text())
    s = stored_experiment("quick", "/x/quick.toml", data)
    assert s.goal == Goal(p99_ms=100.0) and s.thresholds == () and list(s.workloads) == ["default"]
    assert (s.duration, s.warmup, s.repetitions, s.find, s.reproduces) == ("2s", "1s", 2, None, False)
    assert s.validity == {"error_threshold": 0.01, "drift_threshold": 0.25, "others_threshold": 0.05,
                          "speed_threshold": 1.0} and s.named == "/x/quick.toml"
    odd = stored_experiment("q", "", {**data, "goal": {"p99_max": "soon"}, "error_threshold": 0.1,
                                      "thresholds": ["p99 <"], "workload": {"path": 5}, "keep_alive": False})
    assert odd.goal == Goal() and odd.thresholds == () and odd.workloads == {} and odd.keep_alive is False
    assert odd.validity["error_threshold"] == 0.1 and odd.named == "(stored definition)"
