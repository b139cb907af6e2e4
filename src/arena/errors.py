"""The one error type the engine raises for anything a user can fix; the CLI prints it as one line.
And how a signal's stop reaches the code (ask_to_stop, stop_if_asked, forking)."""

from contextlib import contextmanager


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


class NotMeasured(ArenaError):
    """Measurements a command needs could not be made or trusted (every run invalid, a server that
    never started): not the user's input, a failed measurement: exit 1."""


class NotSaved(ArenaError):
    """A result that was measured and could not be written where it belongs (the store is full,
    read-only or gone); the message says where it was kept instead."""


class Terminated(BaseException):
    """SIGTERM to Arena: unwinds like Ctrl-C so every started server is stopped on the way out
    (the CLI exits 143 for it, 130 for Ctrl-C)."""


# The stop a signal asked for (KeyboardInterrupt or Terminated), kept beside the exception its handler
# raises: an exception raised inside code that must catch everything to clean up can be lost, and the
# stop with it. The runner checks at every run's start and end (stop_if_asked), and the CLI at its exit.
_asked: list[type[BaseException]] = []
_forking = 0  # forks in progress (forking())


@contextmanager
def forking():
    """Around a fork that runs Python's at-fork callbacks (subprocess with a preexec_fn): a signal then
    only records its stop, for the code after the fork to raise (stop_if_asked). An exception raised
    in an at-fork callback is lost (Python prints it as ignored), and holding the signals in the main
    thread is not enough: another thread (a probe's, the progress bar's) may take them, and the main
    thread runs the handler inside the callback all the same."""
    global _forking
    _forking += 1
    try:
        yield
    finally:
        _forking -= 1


def raise_now() -> bool:
    """Whether a signal's handler may raise where it runs (not inside a fork: forking())."""
    return _forking == 0


def ask_to_stop(kind: type[BaseException]) -> BaseException:
    """Record that a signal asked Arena to stop; returns the exception for the handler to raise."""
    if kind not in _asked:
        _asked.append(kind)
    return kind()


def asked_to_stop() -> type[BaseException] | None:
    """The stop a signal asked for (SIGTERM's before Ctrl-C's), or None."""
    return Terminated if Terminated in _asked else (_asked[0] if _asked else None)


def clear_stop() -> None:
    """Forget a stop asked for (a command run from code, after it ended)."""
    _asked.clear()


def stop_if_asked() -> None:
    """Raise the stop a signal asked for, if one did (even where its exception was lost)."""
    kind = asked_to_stop()
    if kind is not None:
        raise kind()


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
