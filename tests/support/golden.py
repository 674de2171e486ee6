"""The one golden-file comparison: byte for byte, a unified diff on a difference; the only way
to refresh a golden file is pytest's ``--update-golden`` (the ``update_golden`` fixture).
A golden file only pins what was printed when it was refreshed, so every golden test has
explicit assertions of the facts its output must show beside it."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from support.paths import REPO


def check_golden(path: Path, actual: str | bytes, update: bool, *, produced_by: str) -> None:
    """``actual`` (text is UTF-8) must equal the golden file ``path``; with ``update`` (the
    ``--update-golden`` run) the file is (re)written instead. ``produced_by`` names the
    command that printed ``actual`` (the diff's other side)."""
    data = actual.encode("utf-8") if isinstance(actual, str) else actual
    name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    if update:
        if not path.exists() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return
    if not path.exists():
        pytest.fail(f"{name} is missing; create it with `--update-golden` and review it")
    expected = path.read_bytes()
    if expected != data:
        delta = "".join(
            difflib.unified_diff(
                expected.decode("utf-8", errors="replace").splitlines(keepends=True),
                data.decode("utf-8", errors="replace").splitlines(keepends=True),
                fromfile=str(name),
                tofile=produced_by,
            )
        )
        pytest.fail(
            f"output differs from {name} (refresh with --update-golden if intended):\n{delta}",
            pytrace=False,
        )
