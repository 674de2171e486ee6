"""Problems a person can act on, and the exit codes of the CLI.

A :class:`Problem` is one finding (file, line, object, field, message); a
:class:`RenderError` carries every problem found in one run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from .display import printable


class ExitCode(IntEnum):
    OK = 0
    INVALID_INPUT = 1
    USAGE = 2
    INTERNAL = 3


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the input, formatted ``file:line: Kind/name: field: message``."""

    file: str
    line: int
    obj: str  # "Kind/name", or "" when the document has no identity yet
    field: str  # dotted field path, or ""
    message: str

    def __str__(self) -> str:
        # always file:line (whole-file problems point at line 1) for editors and CI matchers;
        # one line, whatever the input: names with newlines or escape codes are escaped
        parts = [f"{self.file or '<input>'}:{self.line or 1}"]
        if self.obj:
            parts.append(self.obj)
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return printable(": ".join(parts))


class RenderError(Exception):
    """Raised with every problem found; the CLI prints them and exits 1."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: list[Problem] = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))


class NotSupportedError(Exception):
    """A feature the renderer knows about but does not render yet (multinode, Grove, ...)."""


def field_path(loc: Sequence[str | int]) -> str:
    """``("spec", "services", "Frontend", "envs", 0)`` -> ``spec.services.Frontend.envs[0]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
