"""Writing the one output of a run to stdout, whole, or telling why it could not be."""

from __future__ import annotations

import os
import sys

from .errors import UsageError

#: characters encoded and written at a time (an ASCII output)
_SLICE = 1 << 20


class StdoutClosed(UsageError):
    """stdout refused the output (a closed pipe, a full disk): exit 2, output incomplete."""


def write_stdout(text: str) -> None:
    """Write the whole output and flush it; a closed pipe or a full disk raises
    :class:`StdoutClosed` (instead of a traceback, or a silent exit 1 from click at the
    next flush)."""
    try:
        sys.stdout.flush()
        if text.isascii():  # in slices: no second copy of a large output in memory
            for start in range(0, len(text), _SLICE):
                sys.stdout.buffer.write(text[start : start + _SLICE].encode("ascii"))
        else:
            sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
    except OSError as exc:
        _discard_stdout()
        raise StdoutClosed(
            f"cannot write to stdout: {exc.strerror or exc}; the output is incomplete"
        ) from None


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit cannot fail again (and
    print 'Exception ignored ... BrokenPipeError')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # no real file descriptor (tests' captured stdout): nothing to flush at exit
