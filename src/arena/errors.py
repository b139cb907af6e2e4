"""The one error type the engine raises for anything a user can fix; the CLI prints it as one line."""


class ArenaError(Exception):
    """A user-facing failure: the message names the file, key or flag, the value, what is allowed."""


class FailedStart(ArenaError):
    """A server (or front, or service) that did not start: the message's first line says why (and
    where its log was kept); ``log_tail`` is the log's last lines."""

    def __init__(self, message: str, log_tail: str = "", log_path: str | None = None):
        super().__init__(message)
        self.log_tail, self.log_path = log_tail, log_path


class DriverFailed(ArenaError):
    """A load generator that died during its run (killed, crashed): the run could not be made. Not
    the user's input: ``arena load`` exits 1 for it, an experiment stores it as a failed run."""


class NotSaved(ArenaError):
    """A result that was measured and could not be written where it belongs (the store is full,
    read-only or gone); the message says where it was kept instead."""


class Terminated(BaseException):
    """SIGTERM to Arena: unwinds like Ctrl-C so every started server is stopped on the way out
    (the CLI exits 143 for it, 130 for Ctrl-C)."""


def did_you_mean(word: str, choices) -> str:
    """ "did you mean gunicorn-sync, gunicorn-gthread? " for a word close to some of ``choices``: those
    it begins (a family's short name) and those difflib finds alike; "" when none is."""
    import difflib

    if not isinstance(word, str) or not word:
        return ""
    choices = list(choices)
    near = [c for c in choices if c.startswith(word) and c != word]
    near += [c for c in difflib.get_close_matches(word, choices, n=3, cutoff=0.6) if c not in near]
    return f"did you mean {', '.join(near[:4])}? " if near else ""
