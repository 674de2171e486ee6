"""The controller as a process (its real entry point) against a stub API server that
answers every call as a proxy or Go's mux does when a path is not served: ``404`` with the
plain-text body ``404 page not found``. For what the process itself shows: its log lines."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the body a proxy or the API server's mux sends for a path it does not serve
NOT_FOUND_BODY = b"404 page not found\n"
#: the bearer token of the stub's kubeconfig: it must appear in no log line
TOKEN = "tok-9f8e7d6c5b4a-secret"


class _NotFound(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(404)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(NOT_FOUND_BODY)))
        self.end_headers()
        self.wfile.write(NOT_FOUND_BODY)

    do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def not_found_apiserver(tmp: Path) -> Iterator[Path]:
    """A kubeconfig for a stub that answers every call ``404 page not found``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{server.server_port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        f"users: [{{name: u, user: {{token: {TOKEN}}}}}]\n"
    )
    try:
        yield kubeconfig
    finally:
        server.shutdown()
        server.server_close()


def controller_lines(
    kubeconfig: Path, args: list[str], done: Callable[[list[str]], bool], timeout: float = 120
) -> list[str]:
    """The controller's stderr lines, read until ``done(lines)`` (or it exits, or
    ``timeout`` seconds: a bound for a loaded machine, not a measure); then it is stopped."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    cmd = [sys.executable, "-m", "dyn_gitops_operator", "--kubeconfig", str(kubeconfig)]
    cmd += ["--http-address", "", "--no-leader-elect", *args]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    lines: list[str] = []
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if done(lines):
                break
    finally:
        timer.cancel()
        proc.terminate()
        proc.wait(60)
    return lines
