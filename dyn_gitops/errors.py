"""Problems a person can act on, the render side's errors, and the exit codes of the CLI.

A :class:`Problem` is one finding (file, line, object, field, message); a
:class:`RenderError` carries every problem found in one run. Every error the render side
raises on purpose derives from :class:`DynGitopsError` and names its exit code, so each
entry point (CLI, Argo CD plugin, KRM function, post-renderer) ends the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Literal

from .display import printable
from .fieldpath import FieldPath as FieldPath
from .fieldpath import field_path as field_path


class ExitCode(IntEnum):
    OK = 0
    INVALID_INPUT = 1
    USAGE = 2
    INTERNAL = 3
    BRANCH_MOVED = 4  # hydrate: the branch moved while hydrating; run it again
    WOULD_DISRUPT = 5  # adopt --check: the apply would restart, recreate or delete


Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One thing found in the input, shown as ``file:line: Kind/name: field.path: message``.

    Every stage reports what it finds as Problems. A stage that sees only an object (the
    rules, the expansion, the v1beta1 conversion) sets ``path`` alone, from the root of the
    object's document; the stage that holds the document fills in the file, the line and the
    object (:func:`dyn_gitops.parse.located`).
    """

    file: str = ""
    #: 1-based; 0: the whole file (shown as line 1); None: not about a line (none is shown)
    line: int | None = 0
    obj: str = ""  # "Kind/name", or "" when the document has no identity yet
    path: FieldPath = ()
    message: str = ""
    severity: Severity = "error"  # a warning: rendered anyway, as the operator would

    @classmethod
    def at(cls, path: FieldPath, message: str, *, severity: Severity = "error") -> Problem:
        """A problem with the field at ``path``, not located yet."""
        return cls(path=path, message=message, severity=severity)

    @property
    def field(self) -> str:
        """The field path as shown: ``spec.services.Frontend.envs[0]``."""
        return field_path(self.path)

    def sort_key(self) -> tuple[str, int, str, str, str]:
        """The order problems are listed in (a path mixes strings and numbers: it is compared
        as it is shown)."""
        return (self.file, self.line or 0, self.obj, self.field, self.message)

    def __str__(self) -> str:
        # file:line (whole-file problems point at line 1) for editors and CI matchers, the
        # file alone for a problem about no line (the output's); one line, whatever the
        # input: names with newlines or escape codes are escaped
        parts = [self.file if self.line is None else f"{self.file or '<input>'}:{self.line or 1}"]
        if self.obj:
            parts.append(self.obj)
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return printable(": ".join(parts))


class DynGitopsError(Exception):
    """Root of the render side's errors: the exit code it ends a run with, and the lines
    a person reads (already free of secrets)."""

    exit_code: ClassVar[ExitCode] = ExitCode.INVALID_INPUT

    def lines(self) -> list[str]:
        return [f"dyn-gitops: {self}"]


class UsageError(DynGitopsError):
    """The run cannot start as asked: a setting, a path, a revision, an option (exit 2)."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str = "", problems: Iterable[str] = ()) -> None:
        self.problems: list[str] = list(problems) or [message]
        super().__init__(message or "; ".join(self.problems))

    def lines(self) -> list[str]:
        return [f"dyn-gitops: {p}" for p in self.problems]


class RenderError(DynGitopsError):
    """Raised with every problem found; the CLI prints them and exits 1.

    Code that sees only an object (the expansion of a DGD, the v1beta1 conversion) raises it
    with problems not located yet (paths only); the stage that holds the document catches it
    and locates them."""

    exit_code = ExitCode.INVALID_INPUT

    def __init__(self, problems: Iterable[Problem], summary: str | None = None) -> None:
        # once each, in a stable order: two problems that read the same are one
        unique = {p.sort_key(): p for p in problems}
        self.problems: list[Problem] = [unique[k] for k in sorted(unique)]
        #: the closing line instead of "N problems found; <what>" (None: that one)
        self.summary = summary
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self, what: str = "nothing rendered") -> list[str]:
        n = len(self.problems)
        closing = self.summary or f"{n} problem{'s' if n != 1 else ''} found; {what}"
        return [str(p) for p in self.problems] + [f"dyn-gitops: {closing}"]


class NotSupportedError(DynGitopsError):
    """A feature the renderer knows about but does not render yet (multinode, Grove, ...)."""
