"""The one pipeline every entry point uses; emitting the objects is the caller's part.

    Source -parse-> list[Document] -validate-> Iterator[Validated] -expand-> Expanded
           -finalize-> Objects

``read`` made the Source; ``parse``, ``validate``, ``expand`` and ``finalize`` are each one
module (``expand`` a package), and each appends what it finds to one list of problems
(errors and warnings) and goes on, so one run reports every problem. Documents are validated
as the expansion asks for them: the setting max-objects stops a bomb while it expands, and
what comes after it is neither validated nor expanded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import Problem, RenderError
from .expand.stage import Expanded, expand
from .finalize import finalize
from .parse import Document, parse
from .read import Source
from .settings import RenderSettings
from .validate import Validated, validate

Objects = list[dict[str, Any]]


@dataclass
class RenderResult:
    objects: Objects
    graphs: int = 0  # DGDs expanded
    problems: list[Problem] = field(default_factory=list)
    #: rendered anyway, but the API server or the workload will not like it
    warnings: list[Problem] = field(default_factory=list)


def render(source: Source, settings: RenderSettings) -> RenderResult:
    """Render everything in ``source``; raise :class:`RenderError` with every problem."""
    problems: list[Problem] = list(source.problems)  # every stage appends to it
    docs: list[Document] = parse(source, settings, problems)
    valid: Iterator[Validated] = validate(docs, settings, problems)  # as expand asks
    expanded: Expanded = expand(valid, settings, problems)
    _raise_errors(problems)
    objects: Objects = finalize(
        expanded.rendered, settings=settings, commit=source.commit, problems=problems
    )
    _raise_errors(problems)
    if not objects and not settings.allow_empty:
        raise RenderError(
            [
                Problem(
                    source.root,
                    0,
                    message=(
                        "the input renders to nothing; refusing empty output (an empty sync with "
                        "auto-prune deletes workloads); pass --allow-empty if this is intended"
                    ),
                )
            ]
        )
    warnings = [p for p in problems if p.severity == "warning"]
    return RenderResult(objects, expanded.graphs, warnings=warnings)


def _raise_errors(problems: list[Problem]) -> None:
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise RenderError(errors)


__all__ = ["RenderResult", "render"]
