"""Assertions on a refused run (exit 1, nothing on stdout, no traceback, every problem as
``file:line: ...`` on stderr) and the input writer the bad-input tests share."""

from __future__ import annotations

from pathlib import Path

from support.cli import CliResult


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def assert_refused(res: CliResult, *fragments: str, code: int = 1) -> None:
    """The run failed with ``code``, printed nothing on stdout, no traceback, and stderr
    holds every fragment."""
    assert res.code == code, f"exit {res.code}, expected {code}\nstderr:\n{res.stderr}"
    assert res.stdout == "", f"stdout must be empty on error, got:\n{res.stdout[:500]}"
    assert "Traceback" not in res.stderr, res.stderr
    assert "internal error" not in res.stderr, res.stderr
    for fragment in fragments:
        assert fragment in res.stderr, f"{fragment!r} not in stderr:\n{res.stderr}"


def problem(res: CliResult, file: str, line: int, obj: str = "", field: str = "") -> str:
    """The stderr line that reports ``file:line: [obj: ][field: ]...``; fails if absent."""
    prefix = f"{file}:{line}: " + (f"{obj}: " if obj else "") + (f"{field}: " if field else "")
    found = [ln for ln in res.stderr.splitlines() if ln.startswith(prefix)]
    assert found, f"no problem line starting with {prefix!r} in stderr:\n{res.stderr}"
    return found[0]
