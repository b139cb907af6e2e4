"""The runner through its seams: a fake launcher, driver and probe, so every path (resume after an
interruption, a server that does not start, one that dies mid-run, a driver error, validity flags)
is tested deterministically and in milliseconds. The real servers are in test_store_and_runner.py."""

from dataclasses import dataclass, field, replace

import pytest

from arena.results.load_result import Histogram, LoadResult, Phase, SeriesPoint
from arena.errors import ArenaError
from arena.plan.expand import plan
from arena.plan.parse import parse_experiment
from arena.results.resources import ResourceResult
from arena.results.store import Store
from arena.runner import RunCounts, Seams, run_experiment


def experiment(**over):
    data = {"name": "fake", "duration": "1s", "warmup": "0s", "repetitions": 2,
            "workload": {"path": "/work?cpu_ms=1"}, "load": {"concurrency": [1, 4]},
            "servers": [{"server": "puma", "threads": [1, 2]}], "layout": {"server_cpus": "1", "load_cpus": "0"}}
    data.update(over)
    return parse_experiment(data, "fake.toml")


def experiment_file(where, concurrency: str):
    """The fake experiment as a file: puma with 1 and 2 threads, two repetitions, at ``concurrency``."""
    f = where / "fake.toml"
    f.write_text('name = "fake"\nduration = "1s"\nwarmup = "0s"\nrepetitions = 2\n[workload]\npath = "/work"\n'
                 f'[load]\nconcurrency = [{concurrency}]\n[[servers]]\nserver = "puma"\nthreads = [1, 2]\n'
                 '[layout]\nserver_cpus = "1"\nload_cpus = "0"\n')
    return f


def result(completed=1000, errors=0) -> LoadResult:
    h = Histogram(completed, 1, 10, 5.0, 1.0, {"50": 5, "90": 8, "99": 9})
    phase = Phase(1.0, completed, completed, completed, errors, 0, 0, None, float(completed), {200: completed},
                  {"reset": errors} if errors else {}, {}, 0, 0, h, h, None, None)
    return LoadResult("fake", "0", "closed", "u", 4, None, False, phase, None,
                      [SeriesPoint(0.0, completed, completed, errors, 5, 8, 9, 10)], 0.1, 0.1, 1.0, None, False, [],
                      {"interval_s": 1.0})


@dataclass
class FakeProcset:
    pids_: list[int] = field(default_factory=lambda: [100, 101])
    name: str = "fake"

    def pids(self) -> list[int]:
        return list(self.pids_)

    def memory_events(self):
        return None  # no memory controller


class FakeServer:
    def __init__(self, spec, die_after: int | None = None):
        self.spec, self.url, self.procset = spec, "http://127.0.0.1:1", FakeProcset()
        self.runs, self.die_after, self.stopped = 0, die_after, False

    def alive(self) -> bool:
        return self.die_after is None or self.runs < self.die_after

    def described(self) -> dict:
        return {"argv": ["fake", str(self.spec.threads)], "cwd": "/", "env": dict(self.spec.env)}

    def log_tail(self) -> str:
        return "fake: exited"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stopped = True


class FakeProbe:
    def __init__(self, procset, interval=0.5):
        self.started = False

    def start(self):
        self.started = True
        return self

    def stop(self) -> ResourceResult:
        return ResourceResult(1.0, 2, 0.4, 0.1, 50 << 20, 50 << 20, 40 << 20, 60 << 20, None, 2, 4, "fake")


class Machine:
    """Fake launcher and driver that record what they were asked to do."""

    def __init__(self, fail_start=(), die_after=None, driver_errors=0, interrupt_at=None, errors_per_run=0,
                 speeds=None, busy=None, completed=None):
        self.started, self.driven, self.servers = [], [], []
        self.speeds = list(speeds or [])  # the speed checks in turn (ms); then 2.0 each
        self.busy = list(busy or [])  # the CPUs' busy seconds at each end of each window in turn; then 0
        self.completed = list(completed or [])  # each run's requests answered in its second, in turn; then 1000
        self.checked: list[list[int]] = []
        self.fail_start, self.die_after = set(fail_start), die_after
        self.driver_errors, self.interrupt_at, self.errors_per_run = driver_errors, interrupt_at, errors_per_run

    def launch(self, spec):
        self.started.append(spec)
        if spec.threads in self.fail_start:
            raise ArenaError("puma did not become ready\nlog tail ...")
        server = FakeServer(spec, self.die_after)
        self.servers.append(server)
        return server

    def drive(self, spec, cpus=None, live=None):
        self.driven.append(spec)
        if self.interrupt_at is not None and len(self.driven) == self.interrupt_at:
            raise KeyboardInterrupt
        if self.driver_errors:
            self.driver_errors -= 1
            raise ArenaError("wrk: unable to connect to 127.0.0.1:1")
        self.servers[-1].runs += 1
        return result(self.completed.pop(0) if self.completed else 1000, errors=self.errors_per_run)

    def speed(self, cpus):
        self.checked.append(cpus)
        return self.speeds.pop(0) if self.speeds else 2.0

    def cpu_busy(self, cpus):
        return self.busy.pop(0) if self.busy else 0.0

    def seams(self) -> Seams:
        return Seams(launch=self.launch, drivers={"arena-load": self.drive}, probe=FakeProbe, idle_s=0.0,
                     speed=self.speed, cpu_busy=self.cpu_busy, speed_sample=None)


def test_every_run_is_stored_once_and_each_start_serves_its_levels(tmp_path):
    exp, m = experiment(), Machine()
    with Store(tmp_path / "s.db") as store:
        counts = run_experiment(exp, store, seams=m.seams())
        runs = store.runs("fake")
    assert counts == RunCounts(8, 0, 0, 0)
    assert len(m.started) == 4 and all(s.stopped for s in m.servers)  # 2 configurations x 2 repetitions
    assert [s.connections for s in m.driven[:2]] == [1, 4]  # levels ascending within a start
    assert len({r.run_key for r in runs}) == 8 and all(r.valid for r in runs)
    assert sorted(r.server_reused for r in runs) == [False] * 4 + [True] * 4
    assert all(r.resources.cpu_s == pytest.approx(0.5) and r.resources.idle_cpu_cores is not None for r in runs)


def test_a_configurations_idle_cpu_is_probed_at_its_first_start_and_kept_for_its_later_ones(tmp_path):
    idle = []  # the figure each idle probe gave, in turn

    class Probe(FakeProbe):
        def __init__(self, procset, interval=0.5):
            super().__init__(procset, interval)
            self.idle = interval == 0.01  # the idle probe's (idle_s 0); a run's probe samples every 0.5 s

        def stop(self):
            got = super().stop()
            if self.idle:  # 1 and 2 ms of CPU in a second: 0.001 and 0.002 cores
                idle.append(0.001 * (len(idle) + 1))
                return replace(got, window_s=1.0, cpu_user_s=idle[-1], cpu_system_s=0.0)
            return got

    m = Machine(errors_per_run=100)  # every run invalid, so that a second call retakes them all
    seams = Seams(launch=m.launch, drivers={"arena-load": m.drive}, probe=Probe, idle_s=0.0, speed=m.speed,
                  cpu_busy=m.cpu_busy, speed_sample=None)
    with Store(tmp_path / "s.db") as store:
        run_experiment(experiment(), store, seams=seams)
        assert len(m.started) == 4 and len(idle) == 2  # 2 configurations x 2 repetitions: a probe each
        run_experiment(experiment(), store, seams=seams, retake_invalid=True)  # 4 more starts, none probed
        runs = store.runs("fake")
    assert len(m.started) == 8 and len(runs) == 16 and len(idle) == 2
    by = {}
    for r in runs:
        by.setdefault(r.config, set()).add(r.resources.idle_cpu_cores)
    assert sorted(by.values()) == [{0.001}, {0.002}]  # each configuration's runs carry its own probe's figure


def test_an_interrupted_experiment_resumes_with_only_the_missing_runs(tmp_path):
    exp = experiment()
    with Store(tmp_path / "s.db") as store:
        with pytest.raises(KeyboardInterrupt):
            run_experiment(exp, store, seams=Machine(interrupt_at=4).seams())
        kept = {r.run_key for r in store.runs("fake")}
        assert len(kept) == 3
        again = Machine()
        counts = run_experiment(exp, store, seams=again.seams())
        assert counts.done == 5 and counts.skipped == 3
        assert {r.run_key for r in store.runs("fake")} >= kept and len(store.runs("fake")) == 8
    # the resumed sweep drove only what was missing
    assert len(again.driven) == 5


def test_invalid_runs_are_retaken_beside_their_first_attempt_when_asked(tmp_path):
    """A spell of a slower machine (the speed check) makes runs invalid; --retake-invalid takes each
    of them once more, stores the new attempt as its retake beside the first (nothing is replaced),
    and leaves the valid runs alone; the cell's figures come from the valid attempts."""
    from arena.results.aggregate import aggregate

    exp = experiment(speed_threshold=0.3)
    with Store(tmp_path / "s.db") as store:
        # after three runs, checks twice as slow as the machine's usual (2.0 ms)
        first = run_experiment(exp, store, seams=Machine(speeds=[2.0] * 6 + [4.0] * 4).seams())
        invalid = {r.run_key for r in store.runs("fake") if not r.valid}
        assert first.invalid == len(invalid) >= 1
        plain = Machine()
        assert run_experiment(exp, store, seams=plain.seams()).skipped == 8 and plain.driven == []
        again = Machine()
        counts = run_experiment(exp, store, seams=again.seams(), retake_invalid=True)
        assert counts.done == len(invalid) and counts.skipped == 8 - len(invalid)
        runs = store.runs("fake")
        retaken = {r.run_key for r in runs if r.run_key.endswith(" retake 1")}
        assert retaken == {k + " retake 1" for k in invalid} and all(r.valid for r in runs if r.run_key in retaken)
        assert len(runs) == 8 + len(invalid)  # the invalid attempts are kept
        cells = aggregate(runs)
        assert all(c.valid >= 1 for c in cells) and sum(c.total for c in cells) == len(runs)
        # a valid retake ends it: asking again takes nothing
        assert run_experiment(exp, store, seams=Machine().seams(), retake_invalid=True).done == 0


def test_a_server_that_does_not_start_fails_its_runs_and_the_rest_go_on(tmp_path):
    exp, m = experiment(), Machine(fail_start={2})
    events = []
    with Store(tmp_path / "s.db") as store:
        counts = run_experiment(exp, store, events.append, m.seams())
        runs = store.runs("fake")
    assert counts.failed == 4 and counts.done == 4
    assert all(r.threads == 1 for r in runs)  # nothing of the failed configuration is stored (retried next time)
    failed = [e for e in events if e.kind == "failed"]
    assert len(failed) == 4 and all(e.message.startswith("the server did not start: puma did not become ready")
                                    and "\n" not in e.message for e in failed)
    assert [e.index for e in events] == list(range(1, 9))  # each run counted once, in order


def test_a_server_that_dies_mid_run_is_flagged_and_its_later_levels_are_reported_not_skipped(tmp_path):
    exp, m = experiment(repetitions=1, servers=[{"server": "puma", "threads": 1}]), Machine(die_after=1)
    events = []
    with Store(tmp_path / "s.db") as store:
        counts = run_experiment(exp, store, events.append, m.seams())
        (run,) = store.runs("fake")
        (stored,) = store.failures("fake")
    assert not run.valid and "the server died during the run" in run.flags
    assert counts == RunCounts(1, 0, 1, 1)
    (failed,) = [e for e in events if e.kind == "failed"]
    assert "c=4" in failed.run.key and "the server died during an earlier run" in failed.message
    assert (stored.run_key, stored.stage, stored.reason, stored.log_tail) == (
        failed.run.key, "server died", failed.message, "fake: exited")


def test_a_driver_error_fails_that_run_only(tmp_path):
    exp, m = experiment(repetitions=1, servers=[{"server": "puma", "threads": 1}]), Machine(driver_errors=1)
    events = []
    with Store(tmp_path / "s.db") as store:
        counts = run_experiment(exp, store, events.append, m.seams())
        runs = store.runs("fake")
    assert counts.failed == 1 and counts.done == 1 and len(runs) == 1
    (failed,) = [e for e in events if e.kind == "failed"]
    assert failed.message == "the driver failed: wrk: unable to connect to 127.0.0.1:1"


def test_errors_past_the_threshold_store_an_invalid_run(tmp_path):
    exp, m = experiment(repetitions=1, servers=[{"server": "puma", "threads": 1}]), Machine(errors_per_run=50)
    with Store(tmp_path / "s.db") as store:
        counts = run_experiment(exp, store, seams=m.seams())
        runs = store.runs("fake")
    assert counts.invalid == 2
    assert all(not r.valid and r.flags[0].startswith("errors 4.8% of requests") for r in runs)


def test_the_plan_is_what_the_fakes_ran(tmp_path):
    exp, m = experiment(), Machine()
    with Store(tmp_path / "s.db") as store:
        run_experiment(exp, store, seams=m.seams())
    assert [(s.threads) for s in m.started] == [g.config.threads for g in plan(exp)]


def test_the_engine_runs_shows_exports_and_reports_an_experiment_file(tmp_path):
    """The engine functions the CLI calls, called directly (with the fakes for the machine)."""
    import csv
    import re
    import io
    import json

    from arena.app.analysis import analyses
    from arena.app.storage import export
    from arena.app.run import run_file
    from arena.app.report import report
    from arena.report.answer_view import answer_lines
    from arena.report.data import comparison_table

    f = experiment_file(tmp_path, "1, 4")
    db = str(tmp_path / "s.db")
    seen = []
    assert run_file(str(f), db, seen.append, dry_run=True) is None and not (tmp_path / "s.db").exists()
    assert len(seen[0].groups) == 4 and seen[0].estimate_s > 0
    counts = run_file(str(f), db, seams=Machine().seams())
    assert (counts.done, counts.skipped, counts.failed, counts.invalid) == (8, 0, 0, 0)
    assert run_file(str(f), db, seams=Machine().seams()).skipped == 8  # resumed: nothing to do
    (found,) = analyses(db)
    table = comparison_table(found.results.cells)
    assert answer_lines(found.answers[0], False)[0].startswith("most throughput at any latency (no p99 target): "
                                                               "puma[rack] t=") and len(table.rows) == 4
    assert all(row[table.head.index("req/s interval")].startswith("range ") for row in table.rows)
    rows = list(csv.DictReader(io.StringIO(export(db, "fake", "csv"))))
    assert len(rows) == 8 and {r["valid"] for r in rows} == {"1"} and json.loads(rows[0]["flags"]) == []
    # the launch spread over columns (its command as one shell line), times as ISO 8601, a whole level
    # as a whole number
    assert "launch" not in rows[0] and rows[0]["launch.argv"].split()[0] == "fake" and {r["level"] for r in rows} == {"1", "4"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rows[0]["started_at"])
    assert json.loads(export(db, "fake", "json"))[0]["load"]["tool"] == "fake"
    done = report(db, output=str(tmp_path / "r.html"))
    assert done.name == "fake" and done.runs == 8 and done.charts > 5 and (tmp_path / "r.html").stat().st_size > 10_000


def test_a_pool_axis_reaches_the_server_and_is_stored_with_processes_times_pool(tmp_path):
    """pool = ["threads", 2]: each configuration's size in its key, in ARENA_POOL for the app, and
    stored with processes x pool (what the server's processes may open against max_connections)."""
    exp = experiment(repetitions=1, load={"concurrency": [1]}, services=[{"kind": "postgres"}],
                     servers=[{"server": "puma", "processes": 2, "threads": 4, "pool": ["threads", 2]}])
    assert [c.key for c in exp.servers] == ["puma[rack] p=2 t=4 pool=4", "puma[rack] p=2 t=4 pool=2"]

    class Service:  # a database that is up: what the runner needs of one
        env = {"PGHOST": "/nowhere"}
        procset = FakeProcset(name="pg")
        settings = type("Settings", (), {"max_connections": 6})
        log = 0  # refusals it logs: 3 while each run goes

        def describe(self):
            return "PostgreSQL (fake)"

        def log_mark(self):
            self.log += 3
            return self.log - 3

        def refusals(self, mark):
            return (self.log - mark, "sorry, too many clients already") if self.log > mark else (0, None)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    m = Machine()

    def launch(spec):  # the fake launcher resolves knobs as the real one reports them
        server = m.launch(spec)
        server.knobs = {"processes": spec.processes, "threads": spec.threads}
        return server

    seams = Seams(launch=launch, drivers={"arena-load": m.drive}, probe=FakeProbe, idle_s=0.0,
                  start_service=lambda spec, cpus: Service(), speed=m.speed, cpu_busy=m.cpu_busy, speed_sample=None)
    with Store(tmp_path / "s.db") as store:
        run_experiment(exp, store, seams=seams)
        runs = sorted(store.runs("fake"), key=lambda r: r.pool)
    assert sorted(s.env["ARENA_POOL"] for s in m.started) == ["2", "4"] and all(s.env["PGHOST"] for s in m.started)
    assert [(r.pool, r.db_connections, r.db_max_connections, r.db_refused) for r in runs] == [(2, 4, 6, 3), (4, 8, 6, 3)]
    assert runs[1].database.note() == ("the database refused 3 connection(s) (processes x pool = 8 > max_connections 6): "
                                       "sorry, too many clients already")
    assert set(runs[0].services) == {"postgres"} and runs[0].environment.services == {"postgres": "PostgreSQL (fake)"}


def test_a_run_in_a_spell_of_a_slower_machine_is_flagged_against_the_usual_check_and_resume_keeps_it(tmp_path):
    exp = experiment(repetitions=2, servers=[{"server": "puma", "threads": 1}], speed_threshold=0.3)
    # before/after each run: three runs at 2.0 ms; the fourth's checks 2.8 and 3.0 (the faster 40% slower)
    m = Machine(speeds=[2.0] * 6 + [3.0, 2.8])
    with Store(tmp_path / "s.db") as store:
        counts = run_experiment(exp, store, seams=m.seams())
        runs = sorted(store.runs("fake"), key=lambda r: r.started_at)
    assert counts.invalid == 1 and m.checked == [[1]] * 8
    assert [r.speed_ms for r in runs] == [2.0, 2.0, 2.0, 2.8] and all(r.valid for r in runs[:3]) and not runs[3].valid
    assert runs[3].flags == ("the machine ran 40% slower than usual in this experiment in every check before, during "
                             "and after the run (speed check; threshold 30%): a spell of a slower machine",)
    # interrupted after three runs, the experiment resumes on a machine now 40% slower throughout: the
    # reference is the stored checks' median (2.0), not the resumed invocation's own first one
    m = Machine(speeds=[2.0] * 6, interrupt_at=4)
    with Store(tmp_path / "r.db") as store:
        with pytest.raises(KeyboardInterrupt):
            run_experiment(exp, store, seams=m.seams())
        m = Machine(speeds=[2.8, 2.8])
        counts = run_experiment(exp, store, seams=m.seams())
    assert counts == RunCounts(1, 3, 0, 1)
    # the default threshold (twice as slow) lets the same spell pass
    m = Machine(speeds=[2.0] * 6 + [3.0, 2.8])
    with Store(tmp_path / "t.db") as store:
        assert run_experiment(experiment(repetitions=2, servers=[{"server": "puma", "threads": 1}]), store,
                              seams=m.seams()).invalid == 0


def test_a_run_whose_cpus_others_took_is_flagged(tmp_path):
    """The kernel's counters of the run's CPUs, less what Arena's groups used over the window, are
    what others took: beyond 5% of the CPUs, the run is invalid, and the figure is stored."""
    exp = experiment(repetitions=1, servers=[{"server": "puma", "threads": 1}])
    m = Machine(busy=[0.0, 0.0, 0.0, 100.0])  # CPUs 100 s busy over the second run's (short) window
    with Store(tmp_path / "s.db") as store:
        counts = run_experiment(exp, store, seams=m.seams())
        runs = sorted(store.runs("fake"), key=lambda r: r.started_at)
    assert counts.invalid == 1 and runs[0].valid and runs[0].others_cores == 0.0
    assert runs[1].others_cores > 1 and runs[1].flags[0].startswith("other processes took ")




def test_until_decided_repeats_only_the_undecided_cells_and_says_why(tmp_path):
    """Two configurations whose two runs each leave their comparison undecided: rounds beyond the
    plan repeat both cells (and nothing else), each run stored with why, until decided or the most
    repetitions allowed; a budget too small for a round stops before it."""
    from arena.app.decide import run_until_decided

    f = experiment_file(tmp_path, "4")
    db = str(tmp_path / "s.db")
    rounds = []
    m = Machine(completed=[1000, 1100, 1050, 980])  # the planned runs: 5-10% apart, in the shuffled order
    done = run_until_decided(str(f), db, on_round=rounds.append, seams=m.seams(), most=4)
    assert done.rounds == len(rounds) >= 1 and done.extra_runs == 2 * done.rounds
    assert all(len(r.wanted) == 2 for r in rounds)  # both sides of the one comparison
    with Store(db) as store:
        runs = store.runs("fake")
    extra = [r for r in runs if r.why]
    assert len(extra) == done.extra_runs and all(r.why.startswith("until decided: ") for r in extra)
    assert max(r.repetition for r in runs) <= 4 and all(r.repetition > 2 for r in extra)
    # a budget too small for one round: the planned runs only, and it says why it stopped
    db2 = str(tmp_path / "t.db")
    small = run_until_decided(str(f), db2, seams=Machine(completed=[1000, 1100, 1050, 980]).seams(), budget_s=1.0)
    assert small.rounds == 0 and small.stopped.startswith("the budget") and small.undecided


def test_run_counts_of_several_invocations_add_up():
    assert RunCounts(1, 2, 3, 1) + RunCounts(4, 0, 1, 2) == RunCounts(5, 2, 4, 3)
    assert RunCounts() + RunCounts(done=2) == RunCounts(2, 0, 0, 0)
