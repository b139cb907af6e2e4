"""The ``arena`` command: one module per command, each with ``add(subparsers)`` (its arguments) and
``run(args, out)``: parse -> one call into the engine (arena/app/) -> render what it returns.

Only this package turns an ArenaError into a one-line message and an exit code (README: exit codes).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

# Before anything slow is imported: a signal that comes while Arena is still starting is kept and
# acted on as soon as main() runs (a background job inherits SIGINT ignored; without this, a Ctrl-C
# in the first half second would be lost, or a traceback from the middle of an import).
_early: list[int] = []
for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, lambda signum, frame: _early.append(signum))

import importlib  # noqa: E402
from types import ModuleType  # noqa: E402

from rich.console import Console  # noqa: E402

from arena.cli.args import EXIT_ERROR, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOT_SAVED, EXIT_TERMINATED, Parser  # noqa: E402
from arena import __version__  # noqa: E402
from arena.errors import (ArenaError, DriverFailed, NotMeasured, NotSaved, Terminated, ask_to_stop,  # noqa: E402
                          asked_to_stop, clear_stop, raise_now, stop_if_asked)

# The commands in the order --help lists them, each the name of its module in this package. A
# command's module (and the engine it calls) is imported only when that command runs, or when the
# whole parser is wanted (--help, completion): `arena show` need not import what `arena tune` does
# (all 19 cost 0.8 s).
COMMANDS = ("servers", "serve", "load", "run", "merge", "show", "compare", "ls", "export", "import", "report", "predict",
            "recommend", "tune", "simulate", "reproduce", "check", "mix", "reap", "completion")


def command(name: str) -> ModuleType:
    """The module of the command ``name`` (``import`` is the module import_, a Python keyword)."""
    return importlib.import_module(f"arena.cli.{'import_' if name == 'import' else name}")


# Each command's --help ends with these (a test parses every one, so they stay true).
EXAMPLES = {
    "servers": ["arena servers"],
    "serve": ["arena serve puma -w 2 -t 5 --cpus 1", "arena serve gunicorn-gthread --app myapp:app --interface wsgi "
              "--chdir ~/src/myapp"],
    "load": ["arena load http://127.0.0.1:8080/ -c 16 -d 10s", "arena load http://127.0.0.1:8080/ -r 200 -d 30s"],
    "run": ["arena run scenarios/quick.toml", "arena run scenarios/quick.toml --until-decided --budget 20m",
            "arena run scenarios/quick.toml --dry-run", "arena run scenarios/quick.toml --shard 2/4 --store shard-2.db"],
    "merge": ["arena merge shard-1.db shard-2.db -o quick.db"],
    "show": ["arena show quick", "arena show quick --p99-max 100 --json"],
    "compare": ["arena compare last.db:quick quick --fail-on \"p99>+10%,throughput<-5%\" --format markdown",
                "arena compare baseline.json quick"],
    "ls": ["arena ls", "arena ls --store ~/arena/results.db"],
    "export": ["arena export quick --format csv -o quick.csv", "arena export quick --format hgrm -o hgrm/",
               "arena export quick --format hlog --per second -o quick.hlog"],
    "import": ["arena import arena.db.rescued-1234.json"],
    "report": ["arena report quick -o quick.html", "arena report quick --p99-max 100 --export charts/"],
    "predict": ["arena predict quick --server puma -w 2 -t 5 --concurrency 1,8,32",
                "arena predict --server puma -w 2 -t 5 --cpu-ms 5 --io-ms 10 --rate 100,200"],
    "recommend": ["arena recommend quick --concurrency 16 --p99-max 100", "arena recommend quick --rate 150 "
                  "--p99-max 200 --memory-max 500 --verify"],
    "tune": ["arena tune --servers gunicorn-gthread --cpus 1 --p99-max 200ms --budget 2m --write deploy/",
             "arena tune --app config.ru --cpus 1 --memory-max 2GiB --p99-max 300ms --rate 400"],
    "simulate": ["arena simulate --processes 2 --threads 5 --cpu exp:mean=5ms --io fixed:10ms --rate 150",
                 "arena simulate --instances 4 --policy roundrobin,leastconn --service exp:mean=20ms --rate 150"],
    "reproduce": ["arena reproduce --list", "arena reproduce rochkind-heroku"],
    "check": ["arena check", "arena check puma unicorn --app rack"],
    "mix": ["arena mix from-log /var/log/nginx/access.log* -o mix.toml",
            "arena mix from-log app.jsonl --fields method=verb,path=uri,status=code -o mix.toml"],
    "reap": ["arena reap", "arena reap --logs"],
    "completion": ["arena completion bash > /etc/bash_completion.d/arena",
                   "arena completion zsh > \"${fpath[1]}/_arena\""],
}


def _unraisable(u) -> None:
    """A stop raised where Python cannot raise it (a destructor, a weakref callback run by the
    garbage collector: "Exception ignored in ...", a traceback on stderr after a second Ctrl-C) is
    already recorded (errors.ask_to_stop) and acted on where the run next looks (stop_if_asked):
    not printed. Anything else goes to Python's own hook."""
    if isinstance(u.exc_value, (KeyboardInterrupt, Terminated)) and asked_to_stop():
        return
    sys.__unraisablehook__(u)


sys.unraisablehook = _unraisable


def _on_sigterm(signum, frame):
    _stop(Terminated)


def _on_sigint(signum, frame):
    _stop(KeyboardInterrupt)


def _stop(kind: type[BaseException]) -> None:
    """Record the stop; raise it here unless a fork is in progress (errors.forking: then the code after
    the fork raises it)."""
    exc = ask_to_stop(kind)
    if raise_now():
        raise exc


def _stopped(kind: type[BaseException]) -> int:
    if kind is Terminated:
        print("arena: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    print("arena: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def build_parser(only: str | None = None) -> Parser:
    """Arena's parser, with every command, or only the command ``only`` (what one run parses)."""
    p = Parser(prog="arena", description="Measure, explain and predict how Ruby and Python app servers "
                                         "serve a workload.")
    p.add_argument("--version", action="version", version=f"arena {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMANDS if only is None else (only,):
        command(name).add(sub)
    for name, parser in sub.choices.items():
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
    p.set_defaults(parser=p)  # what a command made from the parser itself reads (completion)
    return p


def console() -> Console:
    """Where commands print: the terminal's width, or COLUMNS where it is set (rich reads it for a
    terminal; a pipe gets it too); piped output without it (CI logs, files) gets 200 columns rather
    than rich's 80, so tables do not break."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return Console(width=int(columns))
    return Console() if sys.stdout.isatty() else Console(width=200)


def main(argv: list[str] | None = None) -> int:
    from arena.app.reap import mark, reap_own

    since = mark()
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    words = sys.argv[1:] if argv is None else argv
    # one command's parser where the first word names one; completion writes the whole parser out.
    # Parsed before the handlers below: importing the command's module is still starting, and a
    # signal then is kept (_early), not raised from the middle of an import.
    only = words[0] if words and words[0] in COMMANDS and words[0] != "completion" else None
    args = build_parser(only).parse_args(argv)
    # Explicitly: a process started as a background job inherits SIGINT *ignored*, and Python then
    # installs no KeyboardInterrupt handler; Ctrl-C must stop Arena (and what it started) anyway.
    signal.signal(signal.SIGINT, _on_sigint)
    signal.signal(signal.SIGTERM, _on_sigterm)
    out = console()
    try:
        if _early:  # a signal came before the handlers above were in place
            raise Terminated() if signal.SIGTERM in _early else KeyboardInterrupt()
        code = command(args.command).run(args, out)
        stop_if_asked()  # a signal whose exception was lost on its way (errors.ask_to_stop)
        return code
    except ArenaError as e:
        if asked_to_stop():  # the failure is the signal's doing (arena-load killed with Arena)
            return _stopped(asked_to_stop())
        print(f"arena: error: {e}", file=sys.stderr)  # plain: never wrapped or styled
        # a measurement that failed (not a user's mistake); measured, not stored (the message says where
        # it was kept instead); else bad input
        return (EXIT_FAILED if isinstance(e, (DriverFailed, NotMeasured)) else EXIT_NOT_SAVED if isinstance(e, NotSaved)
                else EXIT_ERROR)
    except (KeyboardInterrupt, Terminated) as e:
        return _stopped(type(e))
    finally:
        # Whatever ended the command (an error, a second Ctrl-C in the middle of a cleanup), leave
        # nothing it started behind: its servers, their groups and work dirs, drivers' temp dirs.
        reap_own(since)
        clear_stop()
        for s, handler in before.items():
            # As the program (argv None), Arena is exiting: more Ctrl-Cs must not kill the
            # interpreter while it shuts down (it resets Python handlers to the default) and turn
            # the exit status 130 into death by signal. Called from code, restore its handlers.
            signal.signal(s, signal.SIG_IGN if argv is None else handler)
