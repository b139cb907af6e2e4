"""``arena completion SHELL``: a completion script for bash, zsh, tcsh or fish, made from the command
line's own parser, so it knows every command, flag and fixed choice as they are (bash, zsh and tcsh
by shtab; fish, which shtab does not write, from the same parser here: one ``complete`` line per
command and per flag)."""

import argparse
import sys

NAME = "completion"
SHELLS = ("bash", "zsh", "tcsh", "fish")


def add(sub) -> None:
    c = sub.add_parser(NAME, help="print a shell completion script (bash, zsh, tcsh, fish)")
    c.add_argument("shell", choices=SHELLS)


def run(args, out) -> int:
    """The script for ``args.shell`` of ``args.parser``, the command line's own (cli/__init__.py)."""
    if args.shell == "fish":
        sys.stdout.write(fish(args.parser))
        return 0
    import shtab

    sys.stdout.write(shtab.complete(args.parser, args.shell))
    return 0


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _options(prog: str, condition: str, actions) -> list[str]:
    """A ``complete`` line per flag: its long and short names, its choices, whether it takes a value."""
    lines = []
    for a in actions:
        if not a.option_strings or a.help == argparse.SUPPRESS:
            continue
        names = " ".join(f"-l {o[2:]}" if o.startswith("--") else f"-s {o[1:]}" for o in a.option_strings
                         if o.startswith("--") or len(o) == 2)
        takes = a.nargs != 0
        value = (f" -x -a {_quote(' '.join(map(str, a.choices)))}" if takes and a.choices
                 else " -r -F" if takes else "")
        help_ = f" -d {_quote(a.help.split(';')[0][:80])}" if a.help else ""
        lines.append(f"complete -c {prog} -n {_quote(condition)} {names}{value}{help_}")
    return lines


def fish(parser: argparse.ArgumentParser) -> str:
    """The fish completion script of ``parser`` (a top-level parser with subcommands)."""
    prog = parser.prog
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help or "" for c in sub._choices_actions}
    lines = [f"# {prog} completion for fish: {prog} completion fish > ~/.config/fish/completions/{prog}.fish",
             f"complete -c {prog} -f"]
    lines += _options(prog, "__fish_use_subcommand", parser._actions)
    for name, p in sub.choices.items():
        lines.append(f"complete -c {prog} -n __fish_use_subcommand -a {name} -d {_quote(helps.get(name, '')[:80])}")
        inside = f"__fish_seen_subcommand_from {name}"
        lines += _options(prog, inside, p._actions)
        for a in p._actions:  # positional arguments with fixed choices (the shell of this very command)
            if not a.option_strings and a.choices and not isinstance(a, argparse._SubParsersAction):
                lines.append(f"complete -c {prog} -n {_quote(inside)} -a {_quote(' '.join(map(str, a.choices)))}")
    return "\n".join(lines) + "\n"
