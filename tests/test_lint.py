"""The code stays ruff- and mypy-clean (the project's typing and style contract)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

LINTED = ["dyn_gitops", "operator", "bench", "tests", "tools"]


def test_ruff_is_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *LINTED, "--output-format", "concise"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_code_is_ruff_formatted() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *LINTED],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_is_clean_on_both_sides() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_render_side_never_imports_the_kubernetes_client() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "dyn_gitops").rglob("*.py")
        if any(
            line.strip().startswith(("import kubernetes", "from kubernetes"))
            for line in p.read_text().splitlines()
        )
    ]
    assert offenders == []
