"""Hardening of the warm render server (issue 11, point 7).

Argo CD deletes the application directory after each ``generate``, so the server (started
from such a directory) must not depend on its working directory; and a client that connects
and then sends nothing, or half a request, must not hold up anyone else's render. Each test
runs the real server process and real ``cmp generate`` clients over its Unix socket.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import CliResult, run_cli
from support.paths import REPO
from support.render_server import (
    HANG_GUARD_S,
    short_tmpdir,
    socket_path,
    start_server_process,
    wait_for_log,
    wait_for_server,
)

from dyn_gitops.argocd.client import MAGIC

SAMPLE = REPO / "samples" / "vllm-agg" / "input" / "vllm-agg.yaml"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    with short_tmpdir("dgh") as d:
        yield d


def _app(where: Path) -> Path:
    where.mkdir(parents=True)
    shutil.copy(SAMPLE, where)
    return where


def _generate(app: Path, tmp: Path, *extra: str) -> CliResult:
    return run_cli(
        "cmp",
        "generate",
        *extra,
        cwd=app,
        env={"TMPDIR": str(tmp), "ARGOCD_APP_NAME": "llm", "ARGOCD_APP_NAMESPACE": "ns"},
    )


def _start_server_in_deleted_dir(tmp: Path, start: Path) -> None:
    """The server process starts with a working directory that is already gone (Argo CD
    removes the app directory while the server it caused to start is still warming up)."""
    start.mkdir()
    sock = socket_path(tmp)
    server = (
        f"{shlex.quote(sys.executable)} -c "
        "'from dyn_gitops.argocd.server import main; main()' "
        f"{shlex.quote(str(sock))}"
    )
    subprocess.Popen(
        [
            "sh",
            "-c",
            f"cd {shlex.quote(str(start))} && rm -rf {shlex.quote(str(start))} && exec {server}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_server_survives_its_start_directory_being_deleted(short_tmp: Path, tmp_path: Path) -> None:
    expected = _generate(_app(tmp_path / "cold"), short_tmp, "--server", "off")
    assert expected.code == 0, expected.stderr
    _start_server_in_deleted_dir(short_tmp, tmp_path / "start")
    wait_for_server(short_tmp)
    for n in range(2):  # each request from a new directory, deleted after it, as Argo CD does
        app = _app(tmp_path / f"app{n}")
        res = _generate(app, short_tmp)
        assert res.code == 0, res.stderr
        assert "(warm server)" in res.stderr
        assert res.stdout == expected.stdout
        shutil.rmtree(app)


def test_the_launcher_never_imports_from_the_app_directory(short_tmp: Path, tmp_path: Path) -> None:
    """The sidecar's launcher and the server it starts import nothing from the application
    directory (a repository's files), and the server does not stay in it."""
    launcher = tmp_path / "bin" / "dyn-gitops"
    launcher.parent.mkdir()
    assert run_cli("cmp", "install-launcher", str(launcher)).code == 0
    marker = tmp_path / "imported-from-the-app"
    first = _app(tmp_path / "first")
    for module in ("socket", "fcntl", "selectors", "json"):  # imported after start-up
        (first / f"{module}.py").write_text(
            f"open({str(marker)!r}, 'a').write({module!r} + '\\n')\n"
        )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")},
        "TMPDIR": str(short_tmp),
        "ARGOCD_APP_NAME": "llm",
        "ARGOCD_APP_NAMESPACE": "ns",
    }

    def generate(app: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(launcher), "cmp", "generate"],
            cwd=app,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )

    cold = generate(first)
    assert cold.returncode == 0, cold.stderr
    sock = wait_for_server(short_tmp)
    pid = int(sock.with_suffix(".sock.pid").read_text())
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    shutil.rmtree(first)
    warm = generate(_app(tmp_path / "second"))
    assert warm.returncode == 0 and "(warm server)" in warm.stderr, warm.stderr
    assert warm.stdout == cold.stdout
    assert not marker.exists(), f"imported from the app directory: {marker.read_text()}"


class _Stuck:
    """Raw connections to the server that never complete their request."""

    def __init__(self, sock: Path) -> None:
        self.silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.silent.connect(str(sock))  # connects, then sends nothing at all
        self.half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.half.connect(str(sock))
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (1, 2))
        self.half.sendmsg(
            [MAGIC + (1000).to_bytes(8, "big")], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
        )
        self.half.sendall(b"/")  # one byte of a 1000-byte request
        self.drip = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.drip.connect(str(sock))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._drip, daemon=True)
        self.thread.start()

    def _drip(self) -> None:
        """A slow client: a well-formed request (descriptors with its first byte), one byte
        every half second, so that no single read waits long, but never the whole of it."""
        request = MAGIC + (1 << 20).to_bytes(8, "big") + b"/" * (1 << 20)
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (1, 2))
        try:
            self.drip.sendmsg([request[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            for byte in request[1:]:
                if self.stop.wait(0.5):
                    return
                self.drip.send(bytes([byte]))
        except OSError:
            return  # the server dropped us: what it should do

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for s in (self.silent, self.half, self.drip):
            s.close()


def test_stuck_clients_do_not_block_others_and_are_dropped(short_tmp: Path, tmp_path: Path) -> None:
    app = _app(tmp_path / "app")
    assert _generate(app, short_tmp).code == 0  # starts the server
    sock = wait_for_server(short_tmp)
    stuck = _Stuck(sock)
    try:
        time.sleep(1)  # the stuck connections are accepted before the real request
        res = _generate(app, short_tmp)  # run_cli's timeout is the hang guard
        assert res.code == 0, res.stderr
        assert "(warm server)" in res.stderr
        # and the stuck connections themselves are closed by the server in the end
        for s in (stuck.silent, stuck.half):
            s.settimeout(HANG_GUARD_S)
            assert s.recv(1) == b""
        stuck.thread.join(HANG_GUARD_S)
        assert not stuck.thread.is_alive(), "the slow client was never dropped"
    finally:
        stuck.close()
    assert _generate(app, short_tmp).code == 0  # the server still serves


# ---------------------------------------------------------------------------- bounds (issue 25)
def _generate_process(app: Path, tmp: Path, stdout: int) -> subprocess.Popen[bytes]:
    """A real ``cmp generate`` client (no ARGOCD_APP_NAME: it starts no server itself)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    return subprocess.Popen(
        [sys.executable, "-c", "from dyn_gitops.oneshot import main; main()", "cmp", "generate"],
        cwd=app,
        env={**env, "TMPDIR": str(tmp), "ARGOCD_APP_NAMESPACE": "ns"},
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


def _first_to_end(procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                return proc
        time.sleep(0.05)
    raise AssertionError(
        "no request was answered busy although the only render slot was taken and the "
        "queue (one request) was full: the queue of complete requests is unbounded"
    )


def test_complete_requests_beyond_the_queue_bound_are_answered_busy(
    short_tmp: Path, tmp_path: Path
) -> None:
    """One render slot, a queue of one: a third request is answered busy at once and its
    client renders in-process; the queued one is served when the slot frees."""
    app = _app(tmp_path / "app")
    expected = _generate(app, short_tmp, "--server", "off")
    log = tmp_path / "server.log"
    server = start_server_process(short_tmp, log, "server.MAX_CHILDREN = 1\nserver.MAX_QUEUED = 1")
    clients: list[subprocess.Popen[bytes]] = []
    r, w = os.pipe()
    try:
        wait_for_server(short_tmp)
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)  # its child blocks writing 12 KB to it
        clients.append(_generate_process(app, short_tmp, stdout=w))
        os.close(w)
        assert select.select([r], [], [], HANG_GUARD_S)[0], "the first request never ran"
        head = os.read(r, 1)  # its child runs, holding the only render slot
        others = [_generate_process(app, short_tmp, subprocess.PIPE) for _ in range(2)]
        clients += others
        busy = _first_to_end(others)
        out, err = busy.communicate(timeout=HANG_GUARD_S)
        assert busy.returncode == 0, err
        assert b"server is busy; rendering in-process" in err and b"(in-process)" in err
        assert out.decode() == expected.stdout  # nothing written twice, nothing lost
        rest = b"".join(iter(lambda: os.read(r, 1 << 16), b""))
        assert clients[0].wait(HANG_GUARD_S) == 0
        assert (head + rest).decode() == expected.stdout
        queued = next(c for c in others if c is not busy)
        out, err = queued.communicate(timeout=HANG_GUARD_S)
        assert queued.returncode == 0 and b"(warm server)" in err, err
        assert out.decode() == expected.stdout
        assert "answered one more busy" in log.read_text()
    finally:
        os.close(r)
        for proc in [*clients, server]:
            proc.kill()
            proc.wait()


#: in the server process: after its warm-up, only 8 more descriptors than it holds
_FEW_DESCRIPTORS = """
import os, resource
_warm_up = server._warm_up
def _warm_up_then_lower_the_limit():
    _warm_up()
    held = len(os.listdir("/proc/self/fd"))
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (held + 8, hard))
server._warm_up = _warm_up_then_lower_the_limit
"""


def test_out_of_descriptors_on_accept_pauses_and_the_server_recovers(
    short_tmp: Path, tmp_path: Path
) -> None:
    """A real EMFILE: the server runs under a low RLIMIT_NOFILE and idle clients take every
    descriptor. It logs once, stops accepting for a while, and serves again once they go."""
    app = _app(tmp_path / "app")
    expected = _generate(app, short_tmp, "--server", "off")
    log = tmp_path / "server.log"
    server = start_server_process(short_tmp, log, _FEW_DESCRIPTORS)
    idle: list[socket.socket] = []
    try:
        sock = wait_for_server(short_tmp)
        for _ in range(24):  # more than the descriptors it has; the rest wait in the backlog
            idle.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            idle[-1].connect(str(sock))
        wait_for_log(server, log, lambda text: "cannot accept" in text, "EMFILE on accept")
        for conn in idle:
            conn.close()
        wait_for_log(  # every idle client dropped: its descriptors free again
            server,
            log,
            lambda text: text.count("bad request") + text.count("dropped a client") >= len(idle),
            "every idle client dropped",
        )
        res = _generate(app, short_tmp)
        assert res.code == 0 and "(warm server)" in res.stderr, res.stderr
        assert res.stdout == expected.stdout
        text = log.read_text()
        assert "Too many open files" in text and "EMFILE" in text
        # logged once per shortage, not once per retry
        assert text.count("cannot accept") <= text.count("accepting connections again") + 1
        assert server.poll() is None
    finally:
        for conn in idle:
            conn.close()
        server.kill()
        server.wait()


class _NoDescriptorsInSystem:
    """A listener whose accept() fails with ENFILE (the system-wide table full: not made
    real in a test); the selector watches the real socket underneath."""

    def __init__(self, real: socket.socket) -> None:
        self.real, self.calls = real, 0

    def fileno(self) -> int:
        return self.real.fileno()

    def accept(self) -> tuple[socket.socket, object]:
        self.calls += 1
        raise OSError(errno.ENFILE, os.strerror(errno.ENFILE))

    def close(self) -> None:
        self.real.close()


def test_enfile_on_accept_pauses_instead_of_ending_the_loop(
    short_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dyn_gitops.argocd import server

    real = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    real.bind(str(short_tmp / "s"))
    real.listen(4)
    real.setblocking(False)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(short_tmp / "s"))  # the listener stays readable: a connection waits
    listener = _NoDescriptorsInSystem(real)
    loop = server._Loop(listener)  # type: ignore[arg-type]
    try:
        for _ in range(5):
            loop.step()  # raised OSError(ENFILE) out of the loop before
        assert listener.calls >= 1
        assert loop.backoff > server.ACCEPT_BACKOFF_S[0]  # paused, for longer each time
        assert capsys.readouterr().err.count("cannot accept") == 1  # logged once
    finally:
        loop.close()
        client.close()


def test_a_request_whose_descriptors_cannot_be_passed_is_answered_busy(short_tmp: Path) -> None:
    """The kernel cannot install the client's stdout/stderr in the server (no descriptor
    free: a real RLIMIT_NOFILE, lowered in this process for two loop turns): the client is
    told busy, so it renders in-process instead of getting no answer (exit 3)."""
    import resource

    from dyn_gitops.argocd import server

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(short_tmp / "s"))
    listener.listen(4)
    listener.setblocking(False)
    loop = server._Loop(listener)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(short_tmp / "s"))
    loop.step()  # accepted: now reading its request
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.dup(0)
    os.close(lowest_free)
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (1, 2))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))  # none free
        client.sendmsg(
            [MAGIC + (1).to_bytes(8, "big")], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
        )
        loop.step()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    client.settimeout(HANG_GUARD_S)
    try:
        assert client.recv(64) == b"busy\n"
        assert not loop.pending and not loop.ready
    finally:
        loop.close()
        client.close()
