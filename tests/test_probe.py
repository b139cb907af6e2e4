"""The probe: summarizing is pure; the sampling loop runs against a fake source; a process is read by psutil."""

import os

import pytest

from arena import probe
from arena.limits import MemoryEvents
from arena.probe import ProcessMemory, Sample

def test_summarize():
    samples = [Sample(100, 60, 150, 2, 10), Sample(300, 70, 400, 3, 14), Sample(200, 50, 250, 3, 12)]
    r = probe.summarize(samples, (1.0, 0.5), (3.0, 1.0), 2.0, 999, "cgroup-v1")
    assert (r.cpu_user_s, r.cpu_system_s, r.cpu_s, r.cpu_cores) == (2.0, 0.5, 2.5, 1.25)
    assert (r.pss_bytes, r.pss_mean_bytes, r.uss_bytes, r.rss_bytes) == (300, 200, 70, 400)
    assert (r.processes, r.threads, r.samples, r.memory_peak_bytes) == (3, 14, 3, 999)
    none = probe.summarize([], None, None, 1.0, None, "process-tree")
    assert none.cpu_s is None and none.cpu_cores is None and none.pss_bytes == 0


class FakeSource:
    """Two processes whose memory grows by one step per sample; CPU advances 0.1 s per read."""

    backend = "fake"

    def __init__(self):
        self.cpu = 0.0
        self.step = 0

    def pids(self):
        return [10, 11]

    def cpu_times(self):
        self.cpu += 0.1
        return self.cpu, self.cpu / 2

    def memory_peak(self):
        return 12345

    def throttling(self):
        return None  # no quota

    def memory_events(self):  # counters that grow between the window's two reads
        self.events = getattr(self, "events", [MemoryEvents(5, 1), MemoryEvents(2, 0)])
        return self.events.pop()


def test_probe_samples_the_whole_set_and_sums_it():
    source = FakeSource()
    reads = []

    def reader(pid):
        reads.append(pid)
        return ProcessMemory(pss=1000 * len(reads), uss=10, rss=5000, threads=2)

    ticks = iter([100.0, 102.0])
    p = probe.Probe(source, interval=3600, reader=reader, clock=lambda: next(ticks)).start()
    r = p.stop()  # one sample at start, one at stop (the interval never elapsed)
    assert r.samples == 2 and r.window_s == 2.0
    assert r.pss_bytes == 3000 + 4000 and r.pss_mean_bytes == round(((1000 + 2000) + (3000 + 4000)) / 2)
    assert r.processes == 2 and r.threads == 4 and r.uss_bytes == 20 and r.rss_bytes == 10000
    assert r.cpu_user_s == pytest.approx(0.1) and r.cpu_system_s == pytest.approx(0.05)
    assert r.memory_peak_bytes == 12345 and r.backend == "fake"
    assert (r.memory_limit_hits, r.oom_kills) == (3, 1)  # the window's: end less start
    assert (r.cpu_periods, r.cpu_throttled_s) == (None, None)  # a counter the source lacks stays None


def test_a_process_that_exits_between_listing_and_reading_is_skipped():
    sample = probe.sample_once(FakeSource(), reader=lambda pid: None if pid == 11 else ProcessMemory(1, 1, 1, 1))
    assert sample == Sample(1, 1, 1, 1, 1)


def test_read_process_reads_this_process():
    me = probe.read_process(os.getpid())
    assert me is not None and 0 < me.uss <= me.pss <= me.rss and me.threads >= 1
    assert probe.read_process(2**22 + 12345) is None  # beyond pid_max: never exists


def test_per_process_the_probe_keeps_each_samples_pss_by_pid_with_its_time():
    """A soak's probe: each sample's PSS of every process by pid (JSON's string keys), timed from the
    start; without per_process none is kept."""
    ticks = iter([100.0, 100.0, 105.5, 105.5])
    p = probe.Probe(FakeSource(), interval=3600, reader=lambda pid: ProcessMemory(pid * 10, 1, 1, 1),
                    clock=lambda: next(ticks), per_process=True).start()
    r = p.stop()
    assert r.pss_series == [(0.0, {"10": 100, "11": 110}), (5.5, {"10": 100, "11": 110})]
    plain = probe.Probe(FakeSource(), interval=3600, reader=lambda pid: ProcessMemory(1, 1, 1, 1),
                        clock=iter([1.0, 2.0]).__next__).start()
    assert plain.stop().pss_series is None


def test_nodelay_is_read_off_the_connections_a_process_accepted_on_its_port():
    """sockets.nodelay copies a process's sockets in (pidfd_getfd) and asks the connections it
    accepted on the port for TCP_NODELAY: here this process's own, two accepted, one set; the client
    ends (another local port) and the listener (no peer) are not counted."""
    import socket

    from arena.sockets import nodelay

    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        accepted = [srv.accept()[0] for _ in clients]
        accepted[0].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            got = nodelay([os.getpid()], port)
            assert (got.checked, got.off, got.unchecked) == (2, 1, None)
            assert nodelay([os.getpid()], port, limit=1).checked == 1
            none = nodelay([os.getpid()], port + 1 if port < 65535 else port - 1)
            assert none.checked == 0 and "held a connection on port" in none.unchecked
        finally:
            for s in clients + accepted:
                s.close()
