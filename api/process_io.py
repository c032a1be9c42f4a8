"""What every ``strata serve`` process does with its sockets and stdout: a single
broker (api.server), a node's supervisor and its processes (api.supervisor)."""

from __future__ import annotations

import socket
import sys

from kwire.address import HostPort


def bind_listener(addr: HostPort, *, backlog: int = 1024, inheritable: bool = False) -> socket.socket:
    """A listening socket on ``addr``, non-blocking; ``inheritable``: handed to the
    processes of a node (api.supervisor), which accept on it too."""
    family = socket.AF_INET6 if ":" in addr.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((addr.host, addr.port))
    except OSError as exc:  # named by its address: which listener clashed is the operator's question
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {addr}: {exc.strerror}") from None
    sock.listen(backlog)
    sock.setblocking(False)
    sock.set_inheritable(inheritable)
    return sock


def say_line(line: str) -> None:
    """One stdout line in one write: ``print`` writes the text and its newline apart when
    stdout is unbuffered (``PYTHONUNBUFFERED``), and another process's write to the same
    pipe (a node's processes log to the supervisor's stderr) could land in between and
    glue itself to the line ("...:43653" + "2026-12-07 ..." read as one port)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
