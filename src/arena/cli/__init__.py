"""The ``arena`` command: one module per command, each with ``add(subparsers)`` (its arguments) and
``run(args, out)``: parse -> one call into the engine (arena/app/) -> render what it returns.

Only this package turns an ArenaError into a one-line message and an exit code (README: exit codes).
"""

from __future__ import annotations

import signal
import sys

from rich.console import Console

from arena.cli import (check, export, load, ls, predict, recommend, report, run, serve, servers, show)
from arena.cli.args import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_TERMINATED, Parser
from arena.errors import ArenaError

COMMANDS = {m.NAME: m for m in (servers, serve, load, run, show, ls, export, report, predict, recommend, check)}


class Terminated(BaseException):
    """SIGTERM to Arena: unwinds like Ctrl-C so every started server is stopped on the way out."""


def _on_sigterm(signum, frame):
    raise Terminated()


def build_parser() -> Parser:
    p = Parser(prog="arena", description="Measure, explain and predict how Ruby and Python app servers "
                                         "serve a workload.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMANDS.values():
        module.add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    # Explicitly: a process started as a background job inherits SIGINT *ignored*, and Python then
    # installs no KeyboardInterrupt handler; Ctrl-C must stop Arena (and what it started) anyway.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _on_sigterm)
    args = build_parser().parse_args(argv)
    # Piped output (CI logs, files) gets a wide table instead of rich's 80-column default.
    out = Console() if sys.stdout.isatty() else Console(width=200)
    try:
        return COMMANDS[args.command].run(args, out)
    except ArenaError as e:
        print(f"arena: error: {e}", file=sys.stderr)  # plain: never wrapped or styled
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("arena: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("arena: terminated", file=sys.stderr)
        return EXIT_TERMINATED
