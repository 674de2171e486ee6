"""One render of a Flux source's artifact: download it (bounded, its digest checked), unpack
it (bounded: regular files and directories only, nothing outside the directory), and render
one of its directories with ``dyn-gitops render --out-dir`` in a child process.

The controller never renders in its own process (ARCHITECTURE.md): the child is the CLI
itself, so the output and the problems are the CLI's, with the same settings (the flags'
defaults, the tree's ``dyn-gitops.yaml``), and a hostile input costs a child bounded by the
renderer's own input limits and the render timeout, not the controller's memory or a stuck
worker.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import subprocess
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

#: the most files unpacked from one source artifact
MAX_FILES = 20_000
#: the most characters of the renderer's stderr carried into a condition message
MAX_MESSAGE = 4000
#: how the child runs the CLI (the one-shot entry point of the ``dyn-gitops`` script)
CLI = [sys.executable, "-c", "from dyn_gitops.oneshot import main; main()"]


class JobFailed(Exception):
    """The render did not produce an artifact; ``reason`` is the condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def checked_path(path: str) -> str:
    """The annotation's directory, relative and inside the artifact ('.' for its root)."""
    norm = posixpath.normpath(path.strip() or ".")
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or "\\" in norm:
        raise JobFailed("InvalidPath", f"render path {path!r} must stay inside the artifact")
    return norm


def fetch(url: str, digest: str, max_size: int, timeout: float) -> bytes:
    """The artifact at ``url``, checked against ``digest`` (``<algorithm>:<hex>``)."""
    algo, _, want = digest.partition(":")
    if algo not in ("sha256", "sha384", "sha512") or not want:
        raise JobFailed("ArtifactFailed", f"unsupported artifact digest {digest!r}")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data: bytes = resp.read(max_size + 1)
    except OSError as exc:
        raise JobFailed("ArtifactFailed", f"downloading {url}: {exc}") from None
    if len(data) > max_size:
        raise JobFailed("ArtifactFailed", f"the source artifact is over {max_size} bytes")
    if hashlib.new(algo, data).hexdigest() != want:
        raise JobFailed("ArtifactFailed", f"the source artifact does not match {digest}")
    return data


def unpack(data: bytes, dest: Path, max_size: int) -> None:
    """Regular files and directories of a ``.tar.gz`` into ``dest``; links, devices and
    paths leaving ``dest`` are skipped (Python's ``data`` extraction filter)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            if len(members) > MAX_FILES:
                raise JobFailed("ArtifactFailed", f"the source artifact has over {MAX_FILES} files")
            if sum(m.size for m in members) > max_size:
                raise JobFailed(
                    "ArtifactFailed", f"the source artifact unpacks to over {max_size} bytes"
                )
            tar.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise JobFailed("ArtifactFailed", f"unpacking the source artifact: {exc}") from None


@dataclass(frozen=True)
class Rendered:
    #: the rendered tree: one file per object and a kustomization.yaml listing them
    dir: Path


def render(tree: Path, path: str, namespace: str, out: Path, timeout: float) -> Rendered:
    """``dyn-gitops render PATH --out-dir`` in ``tree`` (problems name files relative to
    the artifact's root, as in the repository). Exit 1 (invalid input) and 2 (usage) are
    the user's to fix; anything else is reported as the renderer's failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    argv = [*CLI, "render", path, "--out-dir", str(out), "--namespace", namespace]
    try:
        proc = subprocess.run(
            argv, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise JobFailed("RenderFailed", f"the render took over {timeout:g} s") from None
    if proc.returncode != 0:
        text = proc.stderr.strip()
        if len(text) > MAX_MESSAGE:
            text = text[:MAX_MESSAGE] + "\n[...]"
        what = {1: "invalid input", 2: "usage"}.get(proc.returncode, f"exit {proc.returncode}")
        raise JobFailed("RenderFailed", f"dyn-gitops render {path} ({what}):\n{text}")
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.yaml") if p.is_file())
    listing = "".join(f"  - {f}\n" for f in files)
    (out / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n" + listing
    )
    return Rendered(out)


__all__ = ["JobFailed", "Rendered", "checked_path", "fetch", "render", "unpack"]
