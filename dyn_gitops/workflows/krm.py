"""KRM function: a ResourceList in, the same list with every DGD expanded out.

Contract (KRM Functions Specification v1): stdin holds a ``config.kubernetes.io/v1``
ResourceList; ``items`` are expanded through the one pipeline (other items pass through
unchanged, orchestrator annotations included); ``functionConfig`` may carry render settings
(``data`` of a ConfigMap, or ``spec`` of any other kind). It is written beside the input, so
it may only lower a limit; the environment and flags of the process set the ceiling.
Problems become ``results`` (their severity, resourceRef, field.path, file.path/index from
the orchestrator's path annotations) and a non-zero exit; the items are then returned
untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import context
from ..bounded import parse_int
from ..context import Runner
from ..display import count, printable
from ..emit import size_problem, to_yaml, utf8_size
from ..errors import DynGitopsError, Problem, RenderError, UsageError
from ..parse import parse_documents
from ..read import Source, SourceFile
from ..settings import RenderSettings, SettingsError

API_VERSIONS = ("config.kubernetes.io/v1", "config.kubernetes.io/v1beta1")
PATH_ANNOTATIONS = ("internal.config.kubernetes.io/path", "config.kubernetes.io/path")
INDEX_ANNOTATIONS = ("internal.config.kubernetes.io/index", "config.kubernetes.io/index")
#: items given without a path annotation are read as if from this file
UNNAMED = "resourceList.items"
#: a ResourceList holds every document in one: allow it many times a document's node limit
#: (still bounding alias expansion, which grows exponentially) ...
NODES_FACTOR = 100
#: ... and many times a file's size limit (setting max-file-bytes)
STDIN_FACTOR = 10
#: the ResourceList and its items list nest every object two levels deeper
LIST_DEPTH = 2

Obj = dict[str, Any]


class InputError(DynGitopsError):
    """stdin is not a ResourceList; there is nothing to answer with but stderr."""

    def lines(self) -> list[str]:
        return [f"dyn-gitops krm: {self}"]


@dataclass
class Outcome:
    resource_list: Obj
    ok: bool
    problems: list[str] = field(default_factory=list)  # for stderr

    @property
    def text(self) -> str:
        """What goes to stdout (``run`` has checked max-output-bytes on it)."""
        if self._text is None:
            self._text = dump(self.resource_list)
        return self._text

    _text: str | None = None


@dataclass(frozen=True)
class _Doc:
    item: Obj
    file: str  # the synthetic source file it was written to
    first_line: int


def parse(text: str, settings: RenderSettings) -> Obj:
    problems: list[Problem] = []
    docs = parse_documents(
        [SourceFile("<stdin>", text)],
        max_documents=2,
        max_yaml_nodes=settings.max_yaml_nodes * NODES_FACTOR,
        max_total_yaml_nodes=settings.max_total_yaml_nodes,
        max_depth=settings.max_depth + LIST_DEPTH,
        problems=problems,
    )
    if problems:
        raise InputError("; ".join(str(p) for p in problems))
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        raise InputError("expected one ResourceList document on stdin")
    rl: Obj = docs[0].data
    if rl.get("kind") != "ResourceList" or rl.get("apiVersion") not in API_VERSIONS:
        raise InputError(
            f"expected kind ResourceList, apiVersion {API_VERSIONS[0]} "
            f"(found {rl.get('apiVersion')!r} {rl.get('kind')!r})"
        )
    items = rl.get("items")
    if items is None:
        rl["items"] = []
    elif not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InputError("items must be a list of objects")
    return rl


def function_parameters(config: Any) -> dict[str, Any]:
    """Render settings carried by the functionConfig, by setting name."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise SettingsError(["functionConfig: expected an object"])
    values = config.get("data") if config.get("kind") == "ConfigMap" else config.get("spec")
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        where = "data" if config.get("kind") == "ConfigMap" else "spec"
        raise SettingsError([f"functionConfig.{where}: expected a mapping of setting names"])
    return {str(k): v for k, v in values.items()}


def _annotation(item: Obj, names: tuple[str, ...]) -> str | None:
    meta = item.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(ann, dict):  # a wrong shape is the pipeline's to report, not ours
        return None
    for name in names:
        if isinstance(ann.get(name), str):
            return str(ann[name])
    return None


def _sources(items: list[Obj]) -> tuple[list[SourceFile], list[_Doc]]:
    """One source file per origin file (by path annotation), documents in item order."""
    texts: dict[str, list[str]] = {}
    docs: list[_Doc] = []
    lines: dict[str, int] = {}
    for item in items:
        path = _annotation(item, PATH_ANNOTATIONS) or UNNAMED
        text = to_yaml([item])
        docs.append(_Doc(item, path, lines.get(path, 0) + 1))
        texts.setdefault(path, []).append(text)
        lines[path] = lines.get(path, 0) + text.count("\n")
    return [SourceFile(p, "".join(t)) for p, t in texts.items()], docs


def _doc_of(problem: Problem, docs: list[_Doc]) -> _Doc | None:
    """The item a problem is about: by line, or (no line) by its Kind/name."""
    found = None
    for d in docs:
        if d.file != problem.file:
            continue
        if problem.line and d.first_line <= problem.line:
            found = d
        elif not problem.line and problem.obj == (
            f"{d.item.get('kind')}/{(d.item.get('metadata') or {}).get('name')}"
        ):
            return d
    return found


def _result(problem: Problem, docs: list[_Doc]) -> Obj:
    # kpt and kustomize print messages and paths as they are: one visible line each
    result: Obj = {"message": printable(problem.message), "severity": problem.severity}
    doc = _doc_of(problem, docs)
    if doc is not None:
        meta = doc.item.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        ref = {
            "apiVersion": doc.item.get("apiVersion"),
            "kind": doc.item.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
        }
        # only strings: a wrong shape there may hold anything, a credential included
        result["resourceRef"] = {k: v for k, v in ref.items() if v and isinstance(v, str)}
    if problem.field:
        result["field"] = {"path": printable(problem.field)}
    if doc is not None and doc.file != UNNAMED:
        result["file"] = {"path": doc.file}
        index = _annotation(doc.item, INDEX_ANNOTATIONS)
        number = parse_int(index, low=0) if index is not None and index.isdigit() else None
        if number is not None:
            result["file"]["index"] = number
    return result


def run(rl: Obj, *, runner: Runner) -> Outcome:
    """Expand the DGDs among ``rl['items']``; never raises for bad input."""
    items: list[Obj] = rl["items"]
    files, docs = _sources(items)
    try:
        params = function_parameters(rl.get("functionConfig"))
        ctx = context.open_source(
            Source(files=files, root="<resourceList>"), runner=runner, function_config=params
        )
    except UsageError as exc:  # SettingsError is one
        results = [{"message": p, "severity": "error"} for p in exc.problems]
        return Outcome(_answer(rl, items, results), False, list(exc.problems))
    settings = ctx.settings
    try:
        result = context.render(ctx)
    except RenderError as exc:
        results = [_result(p, docs) for p in exc.problems]
        return Outcome(_answer(rl, items, results), False, [_line(r) for r in results])
    info = {
        "message": "dyn-gitops: expanded "
        f"{count(result.graphs, 'DynamoGraphDeployment')}; "
        f"{count(len(items), 'item')} in, {len(result.objects)} out",
        "severity": "info",
    }
    warnings = [_result(p, docs) for p in result.warnings]
    out = Outcome(
        _answer(rl, result.objects, [*warnings, info]), True, [_line(w) for w in warnings]
    )
    too_big = size_problem(utf8_size(out.text), settings, "<resourceList>")
    if too_big is not None:
        results = [{"message": too_big.message, "severity": "error"}]
        return Outcome(_answer(rl, items, results), False, [str(too_big)])
    return out


def _answer(rl: Obj, items: list[Obj], results: list[Obj]) -> Obj:
    out: Obj = {"apiVersion": rl["apiVersion"], "kind": "ResourceList", "items": items}
    if rl.get("functionConfig") is not None:
        out["functionConfig"] = rl["functionConfig"]
    out["results"] = results
    return out


def _line(result: Obj) -> str:
    """A result for stderr: our line numbers are those of the re-serialized items, so the
    file is named with its document index instead."""
    where = result.get("file", {}).get("path", "")
    if "index" in result.get("file", {}):
        where += f" (document {result['file']['index']})"
    ref = result.get("resourceRef") or {}
    parts = [where or "<resourceList>"]
    if ref:
        parts.append(f"{ref.get('kind') or '?'}/{ref.get('name') or '?'}")
    if result.get("field"):
        parts.append(result["field"]["path"])
    return ": ".join([*parts, result["message"]])


def dump(rl: Obj) -> str:
    return to_yaml([rl]).removeprefix("---\n")


def settings_for_reading(runner: Runner) -> RenderSettings:
    """Limits for reading stdin, before the functionConfig is known."""
    try:
        return runner.settings().settings
    except UsageError:
        return RenderSettings()  # reported once the functionConfig is read
