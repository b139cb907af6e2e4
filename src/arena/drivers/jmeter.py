"""Apache JMeter as a driver, to reproduce the studies that used it.

JMeter is Apache JMeter 5.6.3 from Maven Central, assembled into .tools/jmeter by ``make install``
(tools/jmeter/); ``ARENA_JMETER_HOME`` points elsewhere. (Debian's jmeter 2.13 cannot load any
test plan with Debian's XStream: ForbiddenClassException.)

Arena writes the test plan (a .jmx file): one thread group of N threads that loop for the run's
duration over one HTTP sampler (HttpClient4, keep-alive as the experiment says), runs JMeter in
non-GUI mode (``-n -t plan.jmx -l results.jtl``) and reads the JTL, JMeter's per-request record,
written as CSV with its field names. From the JTL come the histograms (JMeter's whole
milliseconds), per-second series, status counts and error classes.

The closed model is N threads with no think time. An arrival rate becomes what the studies used,
JMeter's Constant Throughput Timer shared by all threads of the group: that is a *paced closed*
loop, not an open model. When responses slow down, the threads run out and JMeter sends less than
the target, and latency is measured from the actual send, not the intended one (coordinated
omission). The result says so: model "closed", the target as the offered rate. The pool is
``connections`` threads if given, else one per request per second of the target (so the rate can
hold while responses take under a second), at most 1000.

What JMeter cannot give stays empty: Server-Timing and the per-process balance (its CSV has no
response headers), a warm-up of its own (a separate discarded run, as for ab).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import tempfile
from pathlib import Path
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from arena.drivers.external import failure, generator_fields, histogram, per_second, run_tool, with_warmup
from arena.paths import CHECKOUT
from arena.drivers.spec import Capabilities, LoadSpec
from arena.results.load_result import LoadResult, Phase
from arena.errors import ArenaError
from arena.servers.cgroup import owned_name

MAX_THREADS = 1000

# JMeter properties (-J) that make the JTL a CSV file with what the parser reads
PROPERTIES = {
    "jmeter.save.saveservice.output_format": "csv",
    "jmeter.save.saveservice.print_field_names": "true",
    "jmeter.save.saveservice.timestamp_format": "ms",
    "jmeter.save.saveservice.connect_time": "true",
    "jmeter.save.saveservice.latency": "true",
    "jmeter.save.saveservice.bytes": "true",
    "sampleresult.timestamp.start": "true",  # the timeStamp column is when the request began
    "summariser.interval": "5",
}


CAPABILITIES = Capabilities("jmeter", models=("closed", "open"), bounds=("duration",), methods=("GET", "HEAD", "POST"),
                            bodies=True, keep_alive_off=True, live=False, server_timing=False, balance=False,
                            hdr=True, open_note="a rate is JMeter's Constant Throughput Timer: a paced closed loop, "
                                                "latency from the actual send")


def threads_for(spec: LoadSpec) -> int:
    if spec.connections:
        return spec.connections
    if spec.rate is not None:
        return max(1, min(MAX_THREADS, math.ceil(spec.rate)))
    return 1


def _prop(kind: str, name: str, value) -> str:
    return f'<{kind}Prop name="{name}">{escape(str(value))}</{kind}Prop>'


def test_plan(spec: LoadSpec, seconds: float) -> str:
    """Pure: the .jmx test plan for ``spec`` running ``seconds`` (JMeter's duration is whole seconds)."""
    CAPABILITIES.check(spec)
    u = urlsplit(spec.url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ArenaError(f"driver = \"jmeter\": URL {spec.url!r} is not an http:// or https:// URL")
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    headers = "".join(
        '<elementProp name="" elementType="Header">' + _prop("string", "Header.name", name.strip())
        + _prop("string", "Header.value", value.strip()) + "</elementProp>"
        for name, value in (h.split(":", 1) for h in spec.headers))
    timer = ""
    if spec.rate is not None:
        # calcMode 4: all active threads in this thread group, shared (one pacing for the group)
        timer = ('<ConstantThroughputTimer guiclass="TestBeanGUI" testclass="ConstantThroughputTimer" '
                 'testname="target rate" enabled="true"><intProp name="calcMode">4</intProp>'
                 f'<doubleProp><name>throughput</name><value>{spec.rate * 60:.6f}</value><savedValue>0.0</savedValue>'
                 '</doubleProp></ConstantThroughputTimer><hashTree/>')
    body = ""
    if spec.body is not None:
        body = ('<elementProp name="" elementType="HTTPArgument">'
                + _prop("bool", "HTTPArgument.always_encode", "false") + _prop("string", "Argument.value", spec.body)
                + _prop("string", "Argument.metadata", "=") + "</elementProp>")
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<jmeterTestPlan version="1.2" properties="2.8">
<hashTree>
<TestPlan guiclass="TestPlanGui" testclass="TestPlan" testname="arena" enabled="true">
<elementProp name="TestPlan.user_defined_variables" elementType="Arguments"><collectionProp name="Arguments.arguments"/></elementProp>
{_prop("bool", "TestPlan.functional_mode", "false")}{_prop("bool", "TestPlan.serialize_threadgroups", "false")}
</TestPlan>
<hashTree>
<ThreadGroup guiclass="ThreadGroupGui" testclass="ThreadGroup" testname="users" enabled="true">
{_prop("string", "ThreadGroup.on_sample_error", "continue")}
<elementProp name="ThreadGroup.main_controller" elementType="LoopController" guiclass="LoopControlPanel" testclass="LoopController" testname="loop" enabled="true">
{_prop("bool", "LoopController.continue_forever", "false")}{_prop("int", "LoopController.loops", -1)}
</elementProp>
{_prop("string", "ThreadGroup.num_threads", threads_for(spec))}{_prop("string", "ThreadGroup.ramp_time", 0)}
{_prop("bool", "ThreadGroup.scheduler", "true")}{_prop("string", "ThreadGroup.duration", max(1, math.ceil(seconds)))}
{_prop("string", "ThreadGroup.delay", 0)}
</ThreadGroup>
<hashTree>
<HTTPSamplerProxy guiclass="HttpTestSampleGui" testclass="HTTPSamplerProxy" testname="request" enabled="true">
<elementProp name="HTTPsampler.Arguments" elementType="Arguments"><collectionProp name="Arguments.arguments">{body}</collectionProp></elementProp>
{_prop("bool", "HTTPSampler.postBodyRaw", "true") if body else ""}
{_prop("string", "HTTPSampler.domain", u.hostname)}{_prop("string", "HTTPSampler.port", u.port or (443 if u.scheme == "https" else 80))}
{_prop("string", "HTTPSampler.protocol", u.scheme)}{_prop("string", "HTTPSampler.path", path)}
{_prop("string", "HTTPSampler.method", spec.method)}{_prop("string", "HTTPSampler.implementation", "HttpClient4")}
{_prop("bool", "HTTPSampler.follow_redirects", "false")}{_prop("bool", "HTTPSampler.auto_redirects", "false")}
{_prop("bool", "HTTPSampler.use_keepalive", "true" if spec.keep_alive else "false")}
{_prop("string", "HTTPSampler.connect_timeout", round(spec.connect_timeout_s * 1000))}
{_prop("string", "HTTPSampler.response_timeout", round(spec.timeout_s * 1000))}
</HTTPSamplerProxy>
<hashTree>
<HeaderManager guiclass="HeaderPanel" testclass="HeaderManager" testname="headers" enabled="true"><collectionProp name="HeaderManager.headers">{headers}</collectionProp></HeaderManager>
<hashTree/>
{timer}
</hashTree>
</hashTree>
</hashTree>
</hashTree>
</jmeterTestPlan>
"""


def home() -> Path:
    return Path(os.environ.get("ARENA_JMETER_HOME", CHECKOUT / ".tools" / "jmeter"))


def build_argv(jmeter_home: Path, plan: Path, jtl: Path, log: Path) -> list[str]:
    """Pure: JMeter in non-GUI mode on ``plan``, its per-request record in ``jtl`` (CSV)."""
    return (["java", "-Djava.awt.headless=true", "-jar", str(jmeter_home / "bin" / "ApacheJMeter.jar"), "-n", "-t", str(plan), "-l", str(jtl),
             "-j", str(log)] + [f"-J{k}={v}" for k, v in PROPERTIES.items()])


def error_class(code: str) -> str:
    """JMeter's responseCode of a request that got no HTTP answer, e.g. 'Non HTTP response code:
    java.net.ConnectException' -> 'ConnectException' (JMeter's own classes, the exception's name)."""
    m = re.search(r"([A-Za-z_$][\w$]*)\s*$", code.split(":", 1)[-1].strip())
    return m.group(1).rsplit(".", 1)[-1] if m else "other"


def parse(jtl: str, *, url: str, threads: int, rate: float | None, version: str | None,
          cpu_s: float | None, wall_s: float | None, config: dict) -> LoadResult:
    """JMeter's JTL (CSV with field names) -> LoadResult."""
    reader = csv.DictReader(io.StringIO(jtl))
    if not reader.fieldnames:
        raise ArenaError("jmeter: no results in its JTL file (see its log)")
    rows = list(reader)
    missing = {"timeStamp", "elapsed", "responseCode", "success"} - set(reader.fieldnames)
    if missing:
        raise ArenaError(f"jmeter: the JTL file has no {', '.join(sorted(missing))} column (is it CSV with field names?)")
    status: dict[int, int] = {}
    errors: dict[str, int] = {}
    records = []  # (start ms, elapsed ms, connect ms or None, failed)
    received = sent = 0
    for r in rows:
        code = r["responseCode"]
        answered = code.isdigit()
        if answered:
            status[int(code)] = status.get(int(code), 0) + 1
        cls = None if answered and 200 <= int(code) < 400 else "status" if answered else error_class(code)
        if cls is not None:  # a transport error, or an answer that is not a success (not 2xx/3xx)
            errors[cls] = errors.get(cls, 0) + 1
        received += int(r.get("bytes") or 0)
        sent += int(r.get("sentBytes") or 0)
        connect = r.get("Connect")
        records.append((int(r["timeStamp"]), int(r["elapsed"]), int(connect) if connect not in (None, "") else None,
                        cls is not None))
    t0 = min((s for s, *_ in records), default=0)
    end = max((s + e for s, e, *_ in records), default=t0)
    duration = (end - t0) / 1000
    answered_n = sum(not failed for *_, failed in records)
    n_errors = len(records) - answered_n
    rt = histogram(e * 1000 for _, e, _, failed in records if not failed)
    connects = [c for _, _, c, failed in records if c is not None and not failed]
    measured = Phase(
        duration_s=duration, issued=None, sent=len(records), completed=answered_n, errors=n_errors, unsent=None,
        in_flight=None, offered_rps=rate, achieved_rps=answered_n / duration if duration > 0 else 0.0,
        status=status, error_counts=errors, workers={},
        bytes_sent=sent if "sentBytes" in reader.fieldnames else None, bytes_received=received,
        response_time=rt, service_time=rt, connect_time=histogram(c * 1000 for c in connects) if connects else None,
        send_lag=None, server_timing={},
    )
    return LoadResult(
        tool="jmeter", tool_version=version, model="closed", url=url, connections=threads, rate=rate,
        interrupted=False, measured=measured, warmup=None,
        series=per_second(((s - t0) / 1000, e * 1000, failed) for s, e, _, failed in records), schedule_lag=None,
        **generator_fields("jmeter", cpu_s, wall_s, answered_n),
        config={**config, "pacing": "constant throughput timer (shared)" if rate is not None else None},
        raw={"tool": "jmeter"},
    )


def version_from_log(log: str) -> str | None:
    m = re.search(r"JMeter: Version ([\w.]+)", log)
    return m.group(1) if m else None


def run(spec: LoadSpec, cpus: list[int] | None = None) -> LoadResult:
    return with_warmup(spec, lambda sp, seconds: _run_once(sp, seconds, cpus))


def _run_once(spec: LoadSpec, seconds: float | None, cpus: list[int] | None) -> LoadResult:
    if seconds is None:
        test_plan(spec, 0)  # raises: no request count
    with tempfile.TemporaryDirectory(prefix=owned_name("jmeter") + "-") as tmp:  # reaped if Arena dies
        d = Path(tmp)
        (d / "plan.jmx").write_text(test_plan(spec, seconds))
        jar = home() / "bin" / "ApacheJMeter.jar"
        if not jar.exists():
            raise ArenaError(f"driver = \"jmeter\": no JMeter at {home()} (make install assembles it; "
                             "or set ARENA_JMETER_HOME)")
        argv = build_argv(home(), d / "plan.jmx", d / "results.jtl", d / "jmeter.log")
        # JMeter starts a JVM (seconds) and stops threads at the end of a sample: generous margin
        limit = max(1, math.ceil(seconds)) + spec.timeout_s + 120
        done = run_tool("jmeter", argv, cpus=cpus, limit_s=limit, install="java is needed: apt-get install -y default-jre-headless",
                        env={**os.environ, "HOME": tmp},  # its own HOME: JMeter writes user preferences
                        cwd=tmp)
        log = (d / "jmeter.log").read_text(errors="replace") if (d / "jmeter.log").exists() else ""
        jtl = (d / "results.jtl").read_text() if (d / "results.jtl").exists() else ""
        if done.returncode != 0 or not jtl.strip():
            errs = [line for line in log.splitlines() if " ERROR " in line or "Exception" in line]
            raise failure("jmeter", done) if not errs else ArenaError(f"jmeter: {errs[-1].strip()}")
    return parse(jtl, url=spec.url, threads=threads_for(spec), rate=spec.rate, version=version_from_log(log),
                 cpu_s=done.cpu_s, wall_s=done.wall_s, config={"driver": "jmeter", "argv": argv})
