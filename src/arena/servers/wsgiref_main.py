"""Serve a WSGI app with the standard library's wsgiref: one request at a time, a baseline.

``python -m arena.servers.wsgiref_main --host H --port P module:attr``
"""

import signal
from wsgiref.simple_server import WSGIRequestHandler, make_server

from arena.servers.app_main import host_port_app


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # no per-request log line (as in every catalog entry)
        pass


def main() -> None:
    host, port, app = host_port_app("arena.servers.wsgiref_main")
    server = make_server(host, port, app, handler_class=QuietHandler)
    # Graceful stop: finish the request in hand, then leave. The handler only sets a flag: an
    # exception raised from it would land anywhere, even in wsgiref's bare `except:` (and be lost).
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    server.timeout = 0.1  # handle_request() returns this often when idle, to see the flag
    try:
        while not stopping:
            server.handle_request()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
