"""The dyn-gitops images for tests: built by ``tools/images/build.sh`` (podman, a base assembled
by mmdebstrap from Debian packages; cached by content key), run with podman.

Rootful podman on the CI machine kind needs ``tools/images/containers.conf`` (runc, cgroupfs,
file events, ulimits below the hard limit): every call here passes it as ``CONTAINERS_CONF``.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tools" / "images" / "build.sh"
DEPS = REPO / "tools" / "images" / "deps.sh"
CONTAINERS_CONF = REPO / "tools" / "images" / "containers.conf"

#: how the Argo CD chart runs a sidecar: read-only root, no capabilities, no privilege gain
HARDENED = (
    "--read-only",
    "--tmpfs=/tmp:rw,mode=1777",
    "--cap-drop=all",
    "--security-opt=no-new-privileges",
)


def env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def deps_missing() -> str | None:
    """Why the image tools cannot run here, or None."""
    proc = subprocess.run(["bash", str(DEPS), "--check"], capture_output=True, text=True)
    return None if proc.returncode == 0 else proc.stderr.strip()


@dataclass(frozen=True)
class Images:
    cmp: str
    controller: str
    base: str
    build_seconds: float


def build(timeout: float = 3600) -> Images:
    """Build (or reuse) both images; raises with the build's output on failure."""
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(BUILD)], capture_output=True, text=True, env=env(), timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"tools/images/build.sh failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
        )
    refs = dict(line.split("=", 1) for line in proc.stdout.split() if "=" in line)
    return Images(refs["cmp"], refs["controller"], refs["base"], time.monotonic() - start)


def podman(
    *args: str, timeout: float = 300, check: bool = False
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["podman", *args], capture_output=True, text=True, env=env(), timeout=timeout
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc
