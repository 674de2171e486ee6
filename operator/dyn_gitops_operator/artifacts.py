"""Rendered artifacts for Flux: packed as source-controller packs its own (a gzipped tar,
``sha256:<hex>`` digest), kept bounded on disk and served over plain HTTP.

The tar is deterministic (entries sorted, zero times and owners, fixed modes, no gzip name
or time): the same rendered tree gives the same digest, so a render of an unchanged source
changes nothing in the ExternalArtifact and kustomize-controller is not woken for nothing.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import logging
import os
import re
import tarfile
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

log = logging.getLogger(__name__)

#: the first segment of every artifact path (source-controller uses the source's kind)
KIND_DIR = "externalartifact"
#: what the server answers for: ``/<KIND_DIR>/<namespace>/<name>/<sha256 hex>.tar.gz``
_SERVED = re.compile(
    rf"^/{KIND_DIR}/([a-z0-9]([-a-z0-9]*[a-z0-9])?)/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)/[0-9a-f]{{64}}\.tar\.gz$"
)


class TooLarge(ValueError):
    """An artifact over the size limit."""


def pack(root: Path) -> bytes:
    """Every regular file and directory under ``root`` as a deterministic ``.tar.gz``."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for p in sorted(root.rglob("*"), key=lambda q: q.relative_to(root).as_posix()):
            if p.is_symlink() or not (p.is_file() or p.is_dir()):
                continue
            info = tarfile.TarInfo(p.relative_to(root).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if p.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                continue
            data = p.read_bytes()
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Stored:
    #: relative to the storage root and to the URL base
    path: str
    digest: str
    size: int


class ArtifactStore:
    """Artifacts under ``root``, at most ``keep`` per ExternalArtifact (the newest), each at
    most ``max_size`` bytes. Written by a rename, so the server never serves half a file."""

    def __init__(self, root: Path, *, keep: int, max_size: int) -> None:
        self.root, self.keep, self.max_size = root, keep, max_size
        self._lock = threading.Lock()

    def _dir(self, namespace: str, name: str) -> Path:
        return self.root / KIND_DIR / namespace / name

    def put(self, namespace: str, name: str, data: bytes) -> Stored:
        if len(data) > self.max_size:
            raise TooLarge(
                f"the rendered artifact is {len(data)} bytes, over the limit of {self.max_size}"
            )
        digest = digest_of(data)
        rel = f"{KIND_DIR}/{namespace}/{name}/{digest.split(':', 1)[1]}.tar.gz"
        target = self.root / rel
        with self._lock:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_file():
                os.utime(target)  # the newest again: kept by the collection below
            else:
                tmp = target.with_suffix(".tmp")
                tmp.write_bytes(data)
                tmp.replace(target)
            self._collect(target.parent, target)
        return Stored(rel, digest, len(data))

    def _collect(self, d: Path, current: Path) -> None:
        """Delete all but the ``keep`` newest artifacts of ``d`` (never ``current``)."""
        files = sorted(d.glob("*.tar.gz"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        old = [p for p in files if p != current][self.keep - 1 :]
        for p in old:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                log.info("old artifact deleted", extra={"path": str(p.relative_to(self.root))})

    def has(self, rel: str) -> bool:
        return _SERVED.match("/" + rel) is not None and (self.root / rel).is_file()

    def forget(self, namespace: str, name: str) -> None:
        """Every artifact of one ExternalArtifact (its source no longer asks for one)."""
        with self._lock:
            d = self._dir(namespace, name)
            for p in d.glob("*.tar.gz"):
                p.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                d.rmdir()


class _Handler(BaseHTTPRequestHandler):
    store: ArtifactStore

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        path = self.path.split("?", 1)[0]
        data = None
        if _SERVED.match(path):
            with contextlib.suppress(OSError):
                data = (self.store.root / path.lstrip("/")).read_bytes()
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("artifact request: " + format, *args)


class ArtifactServer:
    """GET and HEAD of stored artifacts (nothing else: no listing, no other file)."""

    def __init__(self, address: str, store: ArtifactStore) -> None:
        host, _, port = address.rpartition(":")
        handler = type("Handler", (_Handler,), {"store": store})
        self.httpd = ThreadingHTTPServer((host or "0.0.0.0", int(port)), handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="artifact-server", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


__all__ = ["KIND_DIR", "ArtifactServer", "ArtifactStore", "Stored", "TooLarge", "digest_of", "pack"]
