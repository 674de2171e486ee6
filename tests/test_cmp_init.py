"""``dyn-gitops cmp init``: the sidecar's init (the image's entrypoint, docs/images.md
"Stopping"), run here as a plain process around a stand-in server.

argocd-cmp-server ignores SIGTERM in effect (it removes its socket and never exits): the
init forwards the signal, kills the server after ``--grace`` seconds and exits 0; a server
that exits by itself gives its own exit code; the server starts with an empty signal mask
and default dispositions. The real image is stopped in tests/test_images.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

#: a stand-in server: prints its pid, then does what argv[1] says
SERVER = r"""
import os, signal, sys, time
what = sys.argv[1]
if what == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(os.getpid(), flush=True)
if what.startswith("exit-"):
    sys.exit(int(what[5:]))
time.sleep(600)
"""


CLI = [sys.executable, "-c", "from dyn_gitops.cli import main; main()"]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


def _start(what: str, grace: str = "0.2") -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [*CLI, "cmp", "init", "--grace", grace, "--", sys.executable, "-c", SERVER, what],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=60)
        pytest.fail(f"the init did not start the server ({proc.returncode}): {proc.stderr.read()}")
    return proc, int(line)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=60)


def test_a_server_that_ignores_sigterm_is_killed_and_the_init_exits_0() -> None:
    proc, pid = _start("ignore-term")
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
        assert _gone(pid)  # killed after the grace period, and reaped
    finally:
        _stop(proc)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_is_forwarded(sig: signal.Signals) -> None:
    # a long grace: the server exits on the forwarded signal itself, not on the kill
    proc, pid = _start("sleep", grace="600")
    try:
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0
        assert _gone(pid)
    finally:
        _stop(proc)


@pytest.mark.parametrize(("what", "code"), [("exit-0", 0), ("exit-3", 3)])
def test_a_server_exiting_by_itself_gives_its_exit_code(what: str, code: int) -> None:
    proc, _ = _start(what)
    try:
        assert proc.wait(timeout=60) == code
    finally:
        _stop(proc)


def test_a_killed_server_exits_as_a_shell_reports_it() -> None:
    proc, pid = _start("sleep")
    try:
        os.kill(pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == 128 + signal.SIGKILL
    finally:
        _stop(proc)


def test_the_server_starts_with_no_blocked_or_ignored_signals() -> None:
    # grep, exec'd directly by the init, shows the signal state it inherited (a Python
    # stand-in would not: Python itself ignores SIGPIPE)
    proc = _init("--", "grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status")
    assert proc.returncode == 0, proc.stderr
    state = dict(line.split(":\t") for line in proc.stdout.splitlines())
    assert int(state["SigBlk"], 16) == 0
    ignored = int(state["SigIgn"], 16)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
        assert not ignored & (1 << (sig - 1)), signal.Signals(sig).name


def test_a_command_that_does_not_exist_is_a_usage_error() -> None:
    proc = _init("--", "/nonexistent/argocd-cmp-server")
    assert proc.returncode == 2
    assert "cannot run /nonexistent/argocd-cmp-server" in proc.stderr


def _init(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "cmp", "init", *args], capture_output=True, text=True, timeout=60, env=_env()
    )
