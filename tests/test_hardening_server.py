"""Hardening of the warm render server (issue 11, point 7).

Argo CD deletes the application directory after each ``generate``, so the server (started
from such a directory) must not depend on its working directory; and a client that connects
and then sends nothing, or half a request, must not hold up anyone else's render. Each test
runs the real server process and real ``cmp generate`` clients over its Unix socket.
"""

from __future__ import annotations

import os
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
from support.render_server import HANG_GUARD_S, short_tmpdir, socket_path, wait_for_server

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
