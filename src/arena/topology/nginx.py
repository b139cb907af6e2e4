"""nginx as the reverse proxy in front of one server instance: its config (pure) and its command.

What a deployment guide would write: the upstream over TCP or a unix socket; ``proxy_buffering`` and
``proxy_request_buffering`` on (nginx's default: the whole response is read from the server at
loopback speed and then trickled to a slow client, freeing the server's worker; the request body is
read before the server sees it) or off (the server's worker writes at the client's pace); keep-alive
to the server (``keepalive`` in the upstream, HTTP/1.1 and an empty Connection header) or a new
connection per request (nginx's default: HTTP/1.0, Connection: close). One worker process per CPU
of the proxy, no access log (its cost would be the proxy's, not the deployment's), every temp path
in its own temp dir. Headers pass through: the client's X-Request-Start reaches the app, so the
app's queue time counts the proxy's part too."""

from __future__ import annotations

from pathlib import Path

from arena.topology import Topology

CONFIG = "nginx.conf"
UPSTREAM_KEEPALIVE = 64  # idle connections to the server each worker keeps
TIMEOUT_S = 300  # to the server: a run's own timeout decides, not the proxy's


def config(t: Topology, host: str, port: int, upstream: str, workdir: Path, workers: int, user: str | None) -> str:
    """Pure: nginx.conf for ``t``: listen on host:port, pass to ``upstream`` ("127.0.0.1:8000" or a
    unix socket's absolute path), ``workers`` worker processes running as ``user`` (nginx started as root would
    otherwise run them as nobody, who cannot reach a socket or temp path in Arena's private temp
    dirs; None: the user it is started as), everything it writes under ``workdir``."""
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    server = f"unix:{upstream}" if upstream.startswith("/") else upstream
    onoff = "on" if t.buffering else "off"
    keepalive = (f"        keepalive {UPSTREAM_KEEPALIVE};\n" if t.upstream_keepalive else "")
    to_server = ("            proxy_http_version 1.1;\n"
                 "            proxy_set_header Connection \"\";\n" if t.upstream_keepalive else "")
    temp = "".join(f"    {kind}_temp_path {workdir}/{kind}_temp;\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (
        "# written by Arena\n"
        + (f"user {user};\n" if user else "") +
        "daemon off;\n"
        "master_process on;\n"
        f"worker_processes {workers};\n"
        f"pid {workdir}/nginx.pid;\n"
        f"error_log {workdir}/front.log warn;\n"
        "events {\n    worker_connections 16384;\n}\n"
        "http {\n"
        "    access_log off;\n"
        f"{temp}"
        "    upstream app {\n"
        f"        server {server};\n"
        f"{keepalive}"
        "    }\n"
        "    server {\n"
        f"        listen {listen} backlog=4096;\n"
        "        location / {\n"
        "            proxy_pass http://app;\n"
        f"{to_server}"
        "            proxy_set_header Host $http_host;\n"
        f"            proxy_buffering {onoff};\n"
        f"            proxy_request_buffering {onoff};\n"
        f"            proxy_read_timeout {TIMEOUT_S}s;\n"
        f"            proxy_send_timeout {TIMEOUT_S}s;\n"
        "        }\n"
        "    }\n"
        "}\n")


def argv(workdir: Path) -> list[str]:
    return ["nginx", "-p", str(workdir), "-c", str(workdir / CONFIG), "-e", str(workdir / "front.log")]


VERSION_ARGV = ["nginx", "-v"]  # "nginx version: nginx/1.22.1" on stderr
VERSION = r"nginx/(\S+)"
