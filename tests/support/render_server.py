"""The warm render server of ``cmp generate`` in tests: its socket, waiting for it, stopping it.

The server lives under ``$TMPDIR/dyn-gitops-<uid>/``; tests give it a short TMPDIR of its own
(a Unix socket path must stay under 108 bytes) and stop it by removing its socket.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dyn_gitops import __version__

HANG_GUARD_S = 120  # only so that a broken server fails a test instead of hanging it


def socket_path(tmp: Path) -> Path:
    return tmp / f"dyn-gitops-{os.getuid()}" / f"render-{__version__}.sock"


def wait_for_server(tmp: Path) -> Path:
    """The socket of the server started under ``tmp``, once it listens and has a pid file."""
    sock = socket_path(tmp)
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if sock.exists() and sock.with_suffix(".sock.pid").exists():
            return sock
        time.sleep(0.1)
    log = sock.with_suffix(".sock.log")
    raise AssertionError(f"no render server: {log.read_text() if log.exists() else 'no log'}")


def stop_servers(tmp: Path) -> None:
    """Remove each server's socket (it exits by itself on that), else SIGTERM it."""
    for pid_file in tmp.glob("dyn-gitops-*/render-*.sock.pid"):
        text = pid_file.read_text().strip()
        pid_file.with_suffix("").unlink(missing_ok=True)
        if not text:
            continue
        pid = int(text)
        if not exited(pid, within=10):
            os.kill(pid, signal.SIGTERM)


def exited(pid: int, *, within: float = HANG_GUARD_S) -> bool:
    """Whether process ``pid`` is gone within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@contextmanager
def short_tmpdir(prefix: str) -> Iterator[Path]:
    """A short temporary directory for TMPDIR; its servers are stopped afterwards."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        stop_servers(d)
        shutil.rmtree(d, ignore_errors=True)


def start_server_process(tmp: Path, log: Path, prelude: str = "") -> subprocess.Popen[bytes]:
    """A warm render server for ``tmp`` in a process of its own, its log in ``log``;
    ``prelude`` runs there first (Python statements; ``server`` is the server module, so a
    test can lower its bounds or wrap a step). Wait for it with :func:`wait_for_server`."""
    code = (
        "import sys\n"
        "from dyn_gitops.argocd import server\n"
        f"{prelude}\n"
        "sys.exit(server.serve(sys.argv[1]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    with log.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-c", code, str(socket_path(tmp))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd="/",
            start_new_session=True,
        )


def wait_for_log(
    proc: subprocess.Popen[bytes], log: Path, done: Callable[[str], bool], what: str
) -> str:
    """The server's log once ``done`` holds for it; fails if the server ends first."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        found = log.read_text(errors="replace")
        if done(found):
            return found
        if proc.poll() is not None:
            raise AssertionError(f"the server ended (exit {proc.returncode}):\n{found}")
        time.sleep(0.05)
    raise AssertionError(f"never logged {what}:\n{log.read_text(errors='replace')}")
