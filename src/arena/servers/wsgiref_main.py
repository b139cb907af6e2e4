"""Serve a WSGI app with the standard library's wsgiref: one request at a time, a baseline.

``python -m arena.servers.wsgiref_main --host H --port P module:attr``
"""

import argparse
import importlib
import signal
from wsgiref.simple_server import WSGIRequestHandler, make_server


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # no per-request log line (as in every catalog entry)
        pass


def main() -> None:
    parser = argparse.ArgumentParser(prog="arena.servers.wsgiref_main")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("target", help="module:attribute of the WSGI app")
    args = parser.parse_args()
    module, _, attr = args.target.partition(":")
    app = getattr(importlib.import_module(module), attr or "app")
    server = make_server(args.host, args.port, app, handler_class=QuietHandler)
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
