"""Shared test helpers. Golden files are refreshed only with ``--update-golden``."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
CONFORMANCE = REPO.parent / "shared" / "conformance" / "dynamo-examples"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files from the current output (review the diff!)")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str, stdin: str | None = None, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> CliResult:
    """Run the real ``dyn-gitops`` entry point in a subprocess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", "from dyn_gitops.cli import entry; entry()", *args],
        input=stdin, capture_output=True, text=True, cwd=cwd, env=full_env, timeout=120)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli() -> Any:
    return run_cli


def render_objects(path: str | Path, **settings: Any) -> list[dict[str, Any]]:
    """Render in-process and return the objects (raises RenderError on bad input)."""
    from dyn_gitops import settings as settings_mod
    from dyn_gitops.pipeline import render
    from dyn_gitops.source import read_path

    flags = {k.replace("_", "-"): v for k, v in settings.items()}
    pre = settings_mod.resolve(flags=flags)
    src = read_path(str(path), max_file_bytes=pre.settings.max_file_bytes)
    resolved = settings_mod.resolve(file_values=src.settings_file, flags=flags)
    return render(src, resolved.settings).objects
