"""The subject workload as a raw WSGI app (PEP 3333). Contract: ../spec.md."""

from arena.subjects.python.workload import STATUS_TEXT, run_sync, sync_parts, wire_headers


def app(environ, start_response):
    resp = run_sync(environ.get("PATH_INFO", "/"), environ.get("QUERY_STRING", ""),
                    environ.get("HTTP_X_REQUEST_START"), "wsgi")
    start_response(STATUS_TEXT[resp.status], wire_headers(resp))
    return [resp.body] if resp.stream is None else sync_parts(resp.stream)
