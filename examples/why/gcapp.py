# Two WSGI apps (docs/why.md). heavy makes 10,000 lists a request and keeps 5,000 of them a while (the
# last 50,000): they survive young collections into the old generation, and full collections walk the
# 300,000-object heap. light makes as many objects, bytes the collector does not track: nothing to wait for.
from collections import deque

HEAP = [[i] for i in range(300_000)]  # long-lived containers each full collection walks
RECENT: deque = deque(maxlen=50_000)


def heavy(environ, start_response):
    RECENT.extend([] for _ in range(5_000))
    dropped = [[] for _ in range(5_000)]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok" if dropped else b""]


def light(environ, start_response):
    dropped = [bytes(1) for _ in range(10_000)]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok" if dropped else b""]
