"""Real components a test needs (tools/test-bins/build.sh): missing ones fail under CI and
skip elsewhere, with the reason."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest


def built_dir(env: str, script: Path) -> Path | None:
    """The bin directory a tools/test-bins build script names (``--print-dir``, nothing
    built), or the one the variable ``env`` points at; None when it cannot be named."""
    if os.environ.get(env):
        return Path(os.environ[env])
    if not script.exists():
        return None
    proc = subprocess.run(["bash", str(script), "--print-dir"], capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    return Path(lines[-1]) if proc.returncode == 0 and lines else None


def missing_component(message: str) -> NoReturn:
    """A real component a test needs is absent: a failure under CI (where scripts/test
    must provide it), a skip with the reason elsewhere (e.g. a machine without Go)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {message}")
    pytest.skip(message)


def need_binaries(*names: str) -> dict[str, Path]:
    """The named test binaries, or fail (CI) / skip (elsewhere) with the reason."""
    from support.controlplane import find_binary, missing_binary_message

    found: dict[str, Path] = {}
    for name in names:
        path = find_binary(name)
        if path is None:
            missing_component(missing_binary_message(name))
        found[name] = path
    return found
