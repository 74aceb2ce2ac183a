"""A command whose standard output's reader went away (``pi-agent-ask desk login-url --qr |
head -1``) ends quietly with :data:`EXIT_PIPE_CLOSED`, as the tools of a shell pipeline do;
a broken pipe anywhere else is an error like any other."""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable

__all__ = ["EXIT_PIPE_CLOSED", "reader_gone", "unless_pipe_closed"]

EXIT_PIPE_CLOSED = 141
"""128 + ``SIGPIPE``: what a shell reports for a program that a closed pipe ended."""


def reader_gone(fd: int) -> bool:
    """Whether ``fd`` is a pipe whose reading end is closed (``poll`` reports an error)."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _fd, events in poller.poll(0))


def unless_pipe_closed(command: Callable[[], int]) -> int:
    """``command``'s exit status, its output flushed; :data:`EXIT_PIPE_CLOSED` when the reader
    of standard output went away meanwhile."""
    try:
        status = command()
        sys.stdout.flush()  # here, not at exit, where a failure is only printed
    except BrokenPipeError:
        if not reader_gone(sys.stdout.fileno()):
            raise
        # What is still buffered can go nowhere: the interpreter's last flush writes it to
        # the null device instead of failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE_CLOSED
    return status
