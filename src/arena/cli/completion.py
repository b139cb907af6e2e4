"""``arena completion SHELL``: a completion script for bash, zsh or tcsh, made from the command line's
own parser (shtab), so it knows every command, flag and fixed choice as they are."""

import sys

NAME = "completion"
SHELLS = ("bash", "zsh", "tcsh")


def add(sub) -> None:
    c = sub.add_parser(NAME, help="print a shell completion script (bash, zsh, tcsh)")
    c.add_argument("shell", choices=SHELLS)


def run(args, out) -> int:
    import shtab

    from arena.cli import build_parser

    sys.stdout.write(shtab.complete(build_parser(), args.shell))
    return 0
