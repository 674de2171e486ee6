"""``dyn-gitops cmp init``: the sidecar's PID 1.

The sidecar's server, argocd-cmp-server, is a poor PID 1: on SIGTERM it removes its socket
and then never exits (its gRPC server is never stopped), and it reaps no orphans (the warm
render server's exited children). Run as its init, this process starts the server, forwards
each stop signal (to every process of the container when it is PID 1, else to the server),
kills what is left after :data:`~dyn_gitops.settings.SIDECAR_STOP_GRACE_S`, reaps every child
and exits 0 after a requested stop, or with the server's own exit code otherwise.

Signals are taken synchronously (blocked, then ``sigtimedwait``): no handler runs between
two system calls, and the server starts with an empty mask and default dispositions.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence

from .. import settings

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})
WAITED = STOP_SIGNALS | {signal.SIGCHLD}
#: reset to their defaults in the server (Python ignores SIGPIPE and SIGXFSZ)
DEFAULTED = WAITED | {signal.SIGPIPE, signal.SIGXFSZ}


def run(argv: Sequence[str], grace: float = settings.SIDECAR_STOP_GRACE_S) -> int:
    """Run ``argv`` under this init until it exits; its exit code (0 after a stop signal).
    Raises ``OSError`` when ``argv`` cannot be started."""
    signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)
    try:
        child = os.posix_spawnp(
            argv[0], list(argv), dict(os.environ), setsigmask=(), setsigdef=DEFAULTED
        )
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, WAITED)
        raise
    return _supervise(child, grace)


def _supervise(child: int, grace: float) -> int:
    stopping = False
    deadline: float | None = None
    while True:
        info: signal.struct_siginfo | None
        if deadline is None:
            info = signal.sigwaitinfo(WAITED)
        else:
            info = signal.sigtimedwait(WAITED, max(0.0, deadline - time.monotonic()))
        if info is None:  # the grace period is over: kill what is left, then reap it
            _send(child, signal.SIGKILL)
            deadline = None
            continue
        if info.si_signo == signal.SIGCHLD:
            status = _reap(child)
            if status is not None:
                return 0 if stopping else _exit_code(status)
            continue
        _send(child, info.si_signo)
        if not stopping:
            stopping, deadline = True, time.monotonic() + grace


def _send(child: int, sig: int) -> None:
    """As PID 1, ``sig`` to every other process of the container (the warm render server
    too); elsewhere only to the server (-1 would reach every process of the user)."""
    with contextlib.suppress(ProcessLookupError):  # nothing left: its SIGCHLD is pending
        os.kill(-1 if os.getpid() == 1 else child, sig)


def _reap(child: int) -> int | None:
    """Reap every exited child (orphans included); the server's wait status if it exited."""
    found = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == child:
            found = status


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # killed by a signal: as a shell reports it
