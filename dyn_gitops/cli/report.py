"""A command's report as data (``-o json`` or ``-o yaml``): one schema per command, the
same in both formats, documented in docs/cli.md. Every report carries ``kind`` and
``schemaVersion``; a new field may be added, none is removed or changes meaning within a
version."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from ..errors import DynGitopsError, ExitCode, Problem, RenderError, UsageError
from ..stdio import write_stdout

SCHEMA_VERSION = 1


def dump(kind: str, body: dict[str, Any], fmt: str) -> str:
    """The report ``kind`` as JSON (indented, ASCII) or YAML (block style, in key order)."""
    data = {"kind": kind, "schemaVersion": SCHEMA_VERSION, **body}
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    import yaml

    return str(
        yaml.safe_dump(_plain(data), sort_keys=False, default_flow_style=False, width=1 << 16)
    )


def _plain(value: Any) -> Any:
    """The report with JSON's types only, as :func:`json.dumps` writes it (a tuple is a
    list), for YAML's safe dumper (which refuses tuples)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def problem(p: Problem) -> dict[str, Any]:
    """One problem as data: ``line`` is 1-based (null: about no line), ``path`` the field
    path's parts (strings and list indexes), ``field`` the same as shown."""
    return {
        "file": p.file or None,
        "line": None if p.line is None else (p.line or 1),
        "object": p.obj or None,
        "field": p.field or None,
        "path": list(p.path),
        "message": p.message,
        "severity": p.severity,
    }


def error_problems(exc: DynGitopsError) -> list[dict[str, Any]]:
    """The problems of an error that ended the run, as data."""
    if isinstance(exc, RenderError):
        return [problem(p) for p in exc.problems]
    found = exc.problems if isinstance(exc, UsageError) else [str(exc)]
    return [problem(Problem(line=None, message=m)) for m in found]


def emit(kind: str, body: dict[str, Any], fmt: str, code: int = ExitCode.OK) -> NoReturn:
    """Write the report on stdout and end with ``code``."""
    from .outcome import reported

    with reported():
        write_stdout(dump(kind, body, fmt))
    raise SystemExit(int(code))


__all__ = ["SCHEMA_VERSION", "dump", "emit", "error_problems", "problem"]
