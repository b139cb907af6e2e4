"""Outputs written whole or not at all: every file Arena writes for the user (an export, a report,
a merged store, tune's config files, a rescue file) goes through here, so a full disk, an error or a
SIGKILL halfway leaves the old file or nothing, never half of the new one.

A file is written into an anonymous file in the target's directory (Linux's O_TMPFILE: a killed
process leaves nothing at all), made durable (fsync), then linked under a temporary name and renamed
over the target (rename is atomic within a directory). Where O_TMPFILE is not available (another
OS, a file system without it), a named ``.NAME.PID.partial`` beside the target stands in; so does a
staging directory for outputs that are several files or that a library must open by path (SQLite).
What a killed process leaves of those is removed by the next writer of the same target
(:func:`clear_stale`): a partial name carries the PID that wrote it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from arena.errors import ArenaError

PARTIAL = ".partial"


def write_file(path: str | Path, data: str | bytes, flag: str) -> None:
    """``data`` into ``path``, whole or not at all; a failure is one line naming ``flag`` and the path."""
    with replacing(path, flag, binary=isinstance(data, bytes)) as f:
        f.write(data)


def writable(path: str | Path, flag: str) -> Path:
    """``path`` can be written as a file: it is not a directory, and its directory exists and takes
    writes (checked before any work, and by every writer here); returns that directory."""
    target = Path(path)
    if target.is_dir():
        raise ArenaError(f"{flag} {path}: is a directory (give a file name)")
    where = target.resolve().parent
    if not where.is_dir():
        raise ArenaError(f"{flag} {path}: its directory {where} does not exist")
    if not os.access(where, os.W_OK):
        raise ArenaError(f"{flag} {path}: its directory {where} cannot be written")
    return where


@contextmanager
def replacing(path: str | Path, flag: str, binary: bool = False) -> Iterator[IO]:
    """A file object whose content replaces ``path`` when the block ends without an exception; on an
    exception (or a failed write or sync) ``path`` is left as it was and nothing new remains. A path
    that is a symbolic link has the file it points to replaced (the link stays); one that is not a
    file (a pipe, a terminal, /dev/stdout) is written in place, as a stream: nothing to replace."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise ArenaError(f"{flag} {path}: cannot write it ({e.strerror})") from None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        try:
            with open(path, "wb" if binary else "w", encoding=None if binary else "utf-8") as stream:
                yield stream
        except OSError as e:
            raise ArenaError(f"{flag} {path}: cannot write it ({e.strerror or e})") from None
        return
    where = writable(path, flag)
    target = Path(os.path.realpath(path))
    clear_stale(target)
    named: Path | None = None
    try:
        try:
            fd = os.open(where, os.O_TMPFILE | os.O_WRONLY, 0o666)
        except (AttributeError, OSError) as e:  # no O_TMPFILE here: a named partial file stands in
            if isinstance(e, OSError) and e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            named = partial_name(target)
            fd = os.open(named, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            try:
                yield f
                f.flush()
                os.fsync(f.fileno())
                if named is None:
                    named = partial_name(target)
                    _link(f.fileno(), where, named.name)
            except BaseException:
                if named is not None:
                    named.unlink(missing_ok=True)
                raise
        os.replace(named, target)
    except OSError as e:
        if named is not None:
            named.unlink(missing_ok=True)
        raise ArenaError(f"{flag} {path}: cannot write it ({e.strerror or e})") from None


@contextmanager
def staging(path: str | Path, flag: str) -> Iterator[Path]:
    """A directory beside ``path`` to write an output of several files into (or a file a library
    opens by path); when the block ends without an exception its files move into ``path`` (made where
    missing; files of the same name replaced, each rename atomic), else it is removed and ``path`` is
    as it was."""
    target = Path(path)
    where = target.resolve().parent
    if not where.is_dir():
        raise ArenaError(f"{flag} {path}: its directory {where} does not exist")
    if target.exists() and not target.is_dir():
        raise ArenaError(f"{flag} {path}: not a directory")
    clear_stale(target)
    stage = partial_name(target)
    try:
        stage.mkdir()
        yield stage
        for f in stage.iterdir():
            _sync(f)
        if not target.exists():
            stage.rename(target)
            return
        for f in stage.iterdir():
            os.replace(f, target / f.name)
    except OSError as e:
        raise ArenaError(f"{flag} {path}: cannot write it ({e.strerror or e})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextmanager
def building(path: str | Path, flag: str) -> Iterator[Path]:
    """A partial path beside ``path`` for a file that a library writes by name (SQLite): renamed over
    ``path`` when the block ends without an exception, else removed (with what the library kept beside
    it, such as SQLite's journal), ``path`` as it was."""
    target, where = Path(path), writable(path, flag)
    clear_stale(target)
    part = partial_name(target)
    try:
        yield part
        _sync(part)
        os.replace(part, target)
    except OSError as e:
        raise ArenaError(f"{flag} {path}: cannot write it ({e.strerror or e})") from None
    finally:
        for p in where.glob(f"{part.name}*"):
            p.unlink(missing_ok=True)


def _link(fd: int, where: Path, name: str) -> None:
    """Give the anonymous file ``fd`` the name ``name`` in ``where``: linkat(2) following the
    /proc/self/fd link (os.link calls linkat, not link, only where a directory fd is given)."""
    d = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=d, follow_symlinks=True)
    finally:
        os.close(d)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def partial_name(target: Path) -> Path:
    """The temporary name of an output on its way to ``target``: hidden, beside it, with the writer's PID."""
    return target.with_name(f".{target.name}.{os.getpid()}{PARTIAL}")


def clear_stale(target: Path) -> list[Path]:
    """Remove what writers of ``target`` that have died left on its way (their partial names)."""
    removed = []
    for p in target.parent.glob(f".{target.name}.*{PARTIAL}*"):  # and what a library kept beside one
        pid = p.name[len(target.name) + 2:].partition(PARTIAL)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
