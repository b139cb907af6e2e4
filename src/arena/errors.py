"""The one error type the engine raises for anything a user can fix; the CLI prints it as one line."""


class ArenaError(Exception):
    """A user-facing failure: the message names the file, key or flag, the value, what is allowed."""


class Terminated(BaseException):
    """SIGTERM to Arena: unwinds like Ctrl-C so every started server is stopped on the way out
    (the CLI exits 143 for it, 130 for Ctrl-C)."""
