"""Serve a WSGI app with bjoern (libev, one process, the app on the event loop's thread), which has
no command line of its own.

``python -m arena.servers.bjoern_main --host H --port P module:attr``
"""

import argparse
import importlib

import bjoern


def main() -> None:
    parser = argparse.ArgumentParser(prog="arena.servers.bjoern_main")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("target", help="module:attribute of the WSGI app")
    args = parser.parse_args()
    module, _, attr = args.target.partition(":")
    app = getattr(importlib.import_module(module), attr or "app")
    try:
        bjoern.run(app, args.host, args.port)  # SIGINT ends its loop (bjoern's own handler)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
