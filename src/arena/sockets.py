"""What a server set on the connections it accepted (TCP_NODELAY, read from its own sockets), and what
the kernel turned away at its listen queue (listen_overflows).

A server that leaves Nagle's algorithm on (TCP_NODELAY off) and writes a response in two sends (its
headers, then its body) holds the second until the client acknowledges the first, and a Linux client
delays that ACK by about 40 ms: every request on a kept-alive connection waits for it. The timing
says so; the socket option proves it. Each of the server's processes' sockets is copied into Arena
with pidfd_getfd(2) (Linux 5.6, and the right to ptrace the process: root here) and, where it is a
connection on the server's port, asked for TCP_NODELAY (getsockopt). Where that
cannot be done, the check says why, and nothing is guessed.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import socket
from dataclasses import dataclass

PIDFD_GETFD = 438  # the syscall's number: the same on every architecture (a 5.6 syscall, in the common table)


@dataclass(frozen=True)
class NoDelay:
    """Of the server's accepted connections read, how many had TCP_NODELAY off (Nagle on); or why
    none could be read (``unchecked``)."""

    checked: int = 0
    off: int = 0
    unchecked: str | None = None


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _getfd(pidfd: int, fd: int) -> int:
    got = _libc().syscall(PIDFD_GETFD, pidfd, fd, 0)
    if got < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return got


def nodelay(pids: list[int], port: int, limit: int = 64) -> NoDelay:
    """TCP_NODELAY on up to ``limit`` of the connections on ``port`` that ``pids`` hold: each socket
    of theirs copied in, and asked where it is a TCP connection whose local port is ``port`` (the
    listener has no peer; a connection the server made to a database has another port)."""
    checked = off = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone, or not ours to read
        try:
            for fd in fds:
                if checked >= limit:
                    break
                try:
                    if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                        continue
                    copy = _getfd(pidfd, int(fd))
                except OSError as e:
                    if e.errno in (errno.ENOSYS, errno.EPERM, errno.EACCES):
                        why = ("pidfd_getfd needs Linux 5.6" if e.errno == errno.ENOSYS
                               else "pidfd_getfd needs the right to ptrace the server (root)")
                        return NoDelay(checked, off, None if checked else why)
                    continue  # closed meanwhile
                try:
                    sock = socket.socket(fileno=copy)
                except OSError:  # the descriptor changed meanwhile: no socket now
                    os.close(copy)
                    continue
                with sock:
                    if not _accepted_on(sock, port):
                        continue
                    try:
                        on = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                    except OSError:  # closed meanwhile
                        continue
                checked += 1
                off += not on
        finally:
            os.close(pidfd)
    return NoDelay(checked, off, None if checked else f"none of the server's processes held a connection on port {port}")


def listen_overflows(netstat: str = "/proc/net/netstat") -> tuple[int, int] | None:
    """The kernel's counts of connections a full accept queue turned away (TcpExt ListenOverflows and
    ListenDrops, since boot, in this network namespace); None where they cannot be read."""
    try:
        with open(netstat) as f:
            rows = [line.split() for line in f if line.startswith("TcpExt:")]
        head, values = rows[0], rows[1]
        return int(values[head.index("ListenOverflows")]), int(values[head.index("ListenDrops")])
    except (OSError, IndexError, ValueError):
        return None


def _accepted_on(sock: socket.socket, port: int) -> bool:
    """Whether ``sock`` is a TCP connection whose local port is ``port`` (one the server accepted)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return False
    try:
        sock.getpeername()
    except OSError:
        return False  # a listener, or not connected
    return sock.getsockname()[1] == port
