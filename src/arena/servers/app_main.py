"""What the servers without a command line of their own (run as ``python -m``) share: their
arguments and the WSGI app they serve.

``python -m arena.servers.<server>_main --host H --port P module:attr``
"""

import argparse
import importlib


def host_port_app(prog: str):
    """(host, port, app) from the command line: --host, --port and the app's module:attribute."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("target", help="module:attribute of the WSGI app")
    args = parser.parse_args()
    module, _, attr = args.target.partition(":")
    return args.host, args.port, getattr(importlib.import_module(module), attr or "app")
