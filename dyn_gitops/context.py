"""The render context: the settings resolved and the source read, once per run.

Every entry point (the CLI, the Argo CD plugin and its warm server, diff, hydrate, the KRM
function, the Helm post-renderer, tests) gets its input here, in the same two steps: the
limits that bound reading come from the runner's own sources (flags, environment), then the
repository's ``dyn-gitops.yaml`` joins them once it is read. Nothing here prints or exits:
failures are :class:`~dyn_gitops.errors.UsageError` (exit 2) or
:class:`~dyn_gitops.errors.RenderError` (exit 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import Problem, RenderError, UsageError
from .settings import ENV_PREFIX, SETTINGS_FILE, RenderSettings, Resolved, SettingsError, resolve

if TYPE_CHECKING:
    from .pipeline import RenderResult
    from .read import Source


class PathNotFound(UsageError):
    """The path to render is not there (in the directory, or at the revision)."""


@dataclass(frozen=True)
class RenderContext:
    """What one run renders, and with which settings (and where each value came from)."""

    source: Source
    resolved: Resolved

    @property
    def settings(self) -> RenderSettings:
        return self.resolved.settings

    def with_settings(self, **changes: Any) -> RenderContext:
        """The same run with some settings replaced (their origin stays as resolved)."""
        return RenderContext(
            self.source,
            Resolved(dataclasses.replace(self.settings, **changes), self.resolved.origins),
        )


@dataclass(frozen=True)
class Runner:
    """The setting sources of whoever runs the tool, and of the Argo CD Application."""

    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    env_prefixes: tuple[str, ...] = (ENV_PREFIX,)
    flags: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    parameters: Mapping[str, str] | None = None
    #: ignore patterns of the runner (``--exclude``), after the ignore file's
    exclude: tuple[str, ...] = ()

    def settings(
        self,
        *,
        file_values: Mapping[str, Any] | None = None,
        function_config: Mapping[str, Any] | None = None,
        file_origin: str = SETTINGS_FILE,
    ) -> Resolved:
        """Every setting resolved from these sources and the input's own; raises
        :class:`UsageError` with every settings problem."""
        try:
            return resolve(
                file_values=file_values,
                file_origin=file_origin,
                env=self.env,
                env_prefixes=self.env_prefixes,
                function_config=function_config,
                parameters=self.parameters,
                flags=self.flags,
            )
        except SettingsError as exc:
            raise UsageError(problems=exc.problems) from None


def open_path(
    path: str = ".",
    rev: str | None = None,
    *,
    runner: Runner,
    repo: str = ".",
) -> RenderContext:
    """Read ``path`` (a directory, a file, or ``-`` for stdin; with ``rev``: from the Git
    object store of ``repo``, no checkout) and resolve the settings with its
    ``dyn-gitops.yaml``: every bad setting of the runner and of every file in one run.
    A directory's files are left out as its ``.dyn-gitops-ignore`` and ``runner.exclude`` say,
    and those GitOps tools keep beside manifests unless they hold an object."""
    try:
        limit, runner_problems = runner.settings().settings.max_file_bytes, []
    except UsageError as exc:  # read with the default bound; reported with the files'
        limit, runner_problems = RenderSettings().max_file_bytes, exc.problems
    src = _read(path, rev, repo, limit, runner.exclude)
    _given(src, path, rev)
    with shown_from_here(src):
        return _open(src, runner, runner_problems)


def _given(src: Source, path: str, rev: str | None) -> None:
    """Remember ``path`` when it is relative, for :meth:`Source.shown`."""
    import os
    import posixpath

    if path in ("-", "") or os.path.isabs(path):
        return
    given = posixpath.normpath(path.replace(os.sep, "/"))
    src.given = "" if given == "." else given


def shown(src: Source, problems: Sequence[Problem]) -> list[Problem]:
    """``problems`` naming their files as :meth:`Source.shown` does."""
    return [dataclasses.replace(p, file=src.shown(p.file)) for p in problems]


@contextmanager
def shown_from_here(src: Source) -> Iterator[None]:
    """A :class:`RenderError` raised inside names its files as :meth:`Source.shown` does
    (every command that renders ``src`` reports the same lines)."""
    try:
        yield
    except RenderError as exc:
        exc.problems[:] = shown(src, exc.problems)
        raise


def _open(src: Source, runner: Runner, runner_problems: list[str]) -> RenderContext:
    from .ignore import IGNORE_FILE
    from .parse import settings_values

    unusable = [p for p in src.problems if p.file == IGNORE_FILE]
    if unusable:
        raise RenderError(unusable, summary=f"{IGNORE_FILE} is unusable; nothing done")
    values = settings_values(src)
    broken = [p for p in src.problems if p.file == SETTINGS_FILE]
    own, nested_broken = _subtree_values(src)
    if not runner_problems:  # else a bad runner setting is reported first, as it always was
        if broken:
            raise RenderError(broken, summary=f"{SETTINGS_FILE} is unusable; nothing done")
        if nested_broken:
            raise RenderError(nested_broken, summary=f"a {SETTINGS_FILE} is unusable; nothing done")
    problems: list[str] = []
    try:
        resolved = runner.settings(file_values=values)
    except UsageError as exc:
        problems += exc.problems
    problems += _resolve_subtrees(src, values or {}, own, runner)
    if problems:
        raise UsageError(problems=list(dict.fromkeys(problems)))  # a root value once
    _skip_beside(src, resolved.settings)
    return RenderContext(src, resolved)


def _skip_beside(src: Source, settings: RenderSettings) -> None:
    """Leave out the files kept beside manifests (kustomization files, a Helm chart's)
    that hold no Kubernetes object; each is listed in ``src.skipped``."""
    from .parse import holds_object

    kept = []
    for f in src.files:
        if f.beside and not holds_object(f, settings):
            src.skipped.append((f.path, f"{f.beside}, no Kubernetes object"))
        else:
            kept.append(f)
    src.files = kept


def _read(path: str, rev: str | None, repo: str, limit: int, exclude: Sequence[str]) -> Source:
    from . import read as source_mod
    from .ignore import ExcludeError

    try:
        if rev is not None:
            sub = path if path != "." else ""
            return source_mod.read_git(repo, rev, sub, max_file_bytes=limit, exclude=exclude)
        return source_mod.read_path(path, max_file_bytes=limit, exclude=exclude)
    except ExcludeError as exc:
        raise UsageError(str(exc)) from None
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise PathNotFound(str(exc)) from None
    except (LookupError, PermissionError) as exc:  # a bad revision, an unreadable root
        raise UsageError(str(exc)) from None


def _subtree_values(src: Source) -> tuple[dict[str, Mapping[str, Any]], list[Problem]]:
    """The values of each subtree's own ``dyn-gitops.yaml``, by its folder, and the problems
    of those that are unusable."""
    import posixpath

    from .parse import file_settings_values

    problems: list[Problem] = []
    own: dict[str, Mapping[str, Any]] = {}
    for file in sorted(src.nested_settings, key=lambda f: f.path):
        found = file_settings_values(file, problems)
        if found is not None:
            own[posixpath.dirname(file.path)] = found
    return own, problems


def _resolve_subtrees(
    src: Source,
    root_values: Mapping[str, Any],
    own: Mapping[str, Mapping[str, Any]],
    runner: Runner,
) -> list[str]:
    """The settings of every subtree with its own ``dyn-gitops.yaml``: the root's values,
    then each file on the way down (the deepest wins), then the runner's sources. Returns
    the problems (each value keeps the file and line it was written at)."""
    errors: list[str] = []
    for d in sorted(own):
        merged: dict[str, Any] = dict(root_values)
        parts = d.split("/")
        for i in range(1, len(parts) + 1):  # each settings file on the way down
            merged.update(own.get("/".join(parts[:i]), {}))
        try:
            sub = runner.settings(file_values=merged, file_origin=f"{d}/{SETTINGS_FILE}")
        except UsageError as exc:
            errors.extend(exc.problems)
            continue
        src.subtrees[d] = sub.settings
    return errors


def open_source(
    source: Source, *, runner: Runner, function_config: Mapping[str, Any] | None = None
) -> RenderContext:
    """A source that came whole (stdin of the post-renderer, a KRM ResourceList): no
    ``dyn-gitops.yaml``; a KRM functionConfig may carry settings."""
    return RenderContext(source, runner.settings(function_config=function_config))


def render(ctx: RenderContext) -> RenderResult:
    """Run the pipeline on the context; raises :class:`RenderError` with every problem
    (files named relative to the current directory when the path was given relative)."""
    from .pipeline import render as run_pipeline

    with shown_from_here(ctx.source):
        result = run_pipeline(ctx.source, ctx.settings)
    result.warnings = shown(ctx.source, result.warnings)
    return result


__all__ = [
    "PathNotFound",
    "RenderContext",
    "Runner",
    "open_path",
    "open_source",
    "render",
    "shown",
    "shown_from_here",
]
