"""The subject workload as a Flask app: one Flask route per endpoint. Contract: ../spec.md."""

from flask import Flask, Response, request

from arena.subjects.python.workload import ENDPOINTS, run_sync, sync_parts, wire_headers

app = Flask("arena_subject")


def _serve():
    resp = run_sync(request.path, request.query_string.decode("latin-1"),
                    request.headers.get("X-Request-Start"), "flask")
    body = resp.body if resp.stream is None else sync_parts(resp.stream)
    return Response(body, status=resp.status, headers=wire_headers(resp))


for _name in ENDPOINTS + ("mix",):
    app.add_url_rule(f"/{_name}", _name, _serve, methods=["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"])


@app.errorhandler(404)
def _not_found(_error):
    return _serve()
