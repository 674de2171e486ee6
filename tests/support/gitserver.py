"""A loopback Git server for the GitOps end-to-end tests (Argo CD and Flux): bare
repositories served over smart HTTP (which go-git needs) by ``git http-backend`` behind a
ThreadingHTTPServer on 127.0.0.1, pushes allowed."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def git(*args: str, cwd: Path | None = None) -> str:
    """``git`` with a fixed identity and no system or prompt configuration; its stdout."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout.strip()


class _GitHandler(BaseHTTPRequestHandler):
    """Smart HTTP: every request is handed to ``git http-backend`` (CGI)."""

    protocol_version = "HTTP/1.0"
    root: str = ""

    def _run(self) -> None:
        path, _, query = self.path.partition("?")
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        env = {
            "GIT_PROJECT_ROOT": self.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "REMOTE_USER": "test",  # enables receive-pack (push)
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60
        ).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _run

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return


@dataclass
class GitServer:
    """Bare repositories under ``root``, served at ``http://127.0.0.1:<port>/<name>.git``."""

    root: Path
    port: int

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}.git"

    def create(self, name: str) -> str:
        """A new empty bare repository (default branch ``main``); its URL."""
        git("init", "--bare", "--initial-branch=main", str(self.root / f"{name}.git"))
        return self.url(name)


@contextlib.contextmanager
def git_server(root: Path) -> Iterator[GitServer]:
    root.mkdir(parents=True, exist_ok=True)
    handler = type("GitHandler", (_GitHandler,), {"root": str(root)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield GitServer(root, int(server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
