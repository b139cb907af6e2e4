"""A property of the experiment reader, over generated documents (hypothesis, bounded): any TOML
document gives either a valid plan or one line of error naming the file, never another exception."""

import json
import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from arena.errors import ArenaError
from arena.plan.expand import plan
from arena import paths
from arena.plan.grid import SERVER_KEYS
from arena.plan.parse import load_experiment, parse_experiment

TOP_KEYS = set(json.loads(paths.schema("experiment.schema.json").read_text())["properties"])

scalars = st.one_of(
    st.integers(min_value=-2**63, max_value=2**63 - 1), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.text(max_size=12), st.sampled_from(["10s", "500ms", "2m", "1h", "-1s", "inf", "2xx", "/work",
                                                          "puma", "closed", "open", "wrk", "ab", "0-1", "1", "rack"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=10)
server = st.fixed_dictionaries({"server": st.sampled_from(["puma", "unicorn", "gunicorn-gthread", "uvicorn", "nope"])},
                               optional={k: values for k in sorted(SERVER_KEYS - {"server"})})
document = st.fixed_dictionaries(
    {"servers": st.one_of(st.lists(server, min_size=1, max_size=3), values)},
    optional={**{k: values for k in sorted(TOP_KEYS - {"servers"})},
              "load": st.fixed_dictionaries({}, optional={"model": st.sampled_from(["closed", "open", "x"]),
                                                          "concurrency": values, "rates": values}),
              "workload": st.fixed_dictionaries({}, optional={"path": values, "method": values, "expect_status": values}),
              "layout": st.fixed_dictionaries({}, optional={"server_cpus": values, "load_cpus": values})})


def valid_or_one_line(check) -> None:
    try:
        exp = check()
    except ArenaError as e:
        text = str(e)
        assert text.startswith("g.toml") and "\n" not in text and "\r" not in text, text
        return
    assert exp.servers and exp.levels and exp.workloads
    assert exp.duration_s is None or 0 < exp.duration_s <= 24 * 3600 and math.isfinite(exp.duration_s)
    assert plan(exp)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document)
@example({"servers": [{"\r": 0}]})  # an unknown key with a control character is shown escaped
@example({"servers": [{"server": "puma", "app": "\x00"}]})  # a NUL byte names no file
@example({"servers": [{"server": "puma"}], "workload": {"mix": "a\x00"}})
def test_any_document_is_a_plan_or_one_line_of_error(doc):
    valid_or_one_line(lambda: parse_experiment(doc, "g.toml"))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_a_plan_or_one_line_of_error(raw):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "g.toml"
        path.write_bytes(raw)
        try:
            load_experiment(path)
        except ArenaError as e:
            assert str(e).startswith(str(path)) and "\n" not in str(e), str(e)
