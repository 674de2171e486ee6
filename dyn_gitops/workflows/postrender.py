"""Helm post-renderer: every rendered manifest on stdin, the expanded manifests on stdout.

Helm tells which template each document came from: Helm 4 with the annotation
:data:`HELM_FILENAME` (which it reads back, to file each output object under its template,
and then removes), Helm 3 with a ``# Source: <chart>/templates/<file>`` comment. Documents
are grouped back into those files before rendering, so a problem reads
``mychart/templates/dgd.yaml:12: ...`` and rendered objects name their template in
``dyn-gitops.io/source-path``; under Helm 4 they also carry the annotation of their graph's
template, so Helm files them there instead of in ``generated-by-postrender-N.yaml``.
"""

from __future__ import annotations

import re
from typing import Any

from .. import keys
from ..errors import Problem, UsageError
from ..parse import load_bounded, parse
from ..read import Source, SourceFile
from ..settings import RenderSettings

STDIN = "-"
HELM_FILENAME = "postrenderer.helm.sh/postrender-filename"
_DOC_START = re.compile(r"---(\s|$)")
_SOURCE = re.compile(r"#\s*Source:\s*(\S.*?)\s*$")
_ANNOTATION = re.compile(r"^\s+" + re.escape(HELM_FILENAME) + r":\s*(\S.*?)\s*$", re.MULTILINE)


def _source_of(chunk: list[str]) -> str | None:
    """The template of a document: Helm 4's annotation, else a ``# Source:`` comment."""
    found = _ANNOTATION.search("".join(chunk))
    if found:
        try:  # one line of text: a scalar, or a flow collection that is refused
            value = load_bounded(found.group(1), max_depth=1, max_nodes=1, what=HELM_FILENAME)
        except ValueError:
            value = None
        if isinstance(value, str) and value:
            return value
    for line in chunk:
        stripped = line.strip()
        if _DOC_START.match(stripped) or not stripped:
            continue
        comment = _SOURCE.match(stripped)
        if comment:
            return comment.group(1)
        if not stripped.startswith("#"):
            return None
    return None


#: the group of the kinds dyn-gitops expands; their children go where the source object is
DYNAMO_GROUP = "nvidia.com"


def without_namespace(source: Source, settings: RenderSettings) -> list[str]:
    """``Kind/name`` of each Dynamo object of ``source`` that sets no ``metadata.namespace``
    (its children would land in the setting ``namespace``)."""
    found: list[str] = []
    problems: list[Problem] = []  # reported by the render itself
    for doc in parse(source, settings, problems):
        data = doc.data
        if not isinstance(data, dict):
            continue
        group = str(data.get("apiVersion", "")).partition("/")[0]
        meta = data.get("metadata")
        if group != DYNAMO_GROUP or not isinstance(meta, dict) or meta.get("namespace"):
            continue
        found.append(f"{data.get('kind')}/{meta.get('name')}")
    return found


def require_namespace(source: Source, settings: RenderSettings, namespace_origin: str) -> None:
    """Refuse to guess the release namespace.

    Helm does not tell a post-renderer the release namespace (``helm template -n prod``;
    Helm 4 does not even pass ``HELM_NAMESPACE`` to a plugin, and under Helm 3 that
    variable is the shell's, which ``-n`` overrides). A Dynamo object without its own
    namespace would have its children rendered into the setting's default namespace
    (``default``), away from the release. So the namespace must come from the object
    (``namespace: {{ .Release.Namespace }}`` in the template) or be given (the flag or
    ``DYN_GITOPS_NAMESPACE``); otherwise this raises :class:`UsageError`.
    """
    if namespace_origin != "default":
        return
    missing = without_namespace(source, settings)
    if not missing:
        return
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    raise UsageError(
        f"post-render: {shown} sets no metadata.namespace, and Helm does not tell a "
        "post-renderer the release namespace (Helm 4 does not pass HELM_NAMESPACE to "
        "plugins); refusing to render into the default namespace 'default'. Give it: "
        "--post-renderer-args --namespace=<release namespace> (Helm 3: --post-renderer-args "
        "post-render --post-renderer-args --namespace=<ns>), or DYN_GITOPS_NAMESPACE, or "
        "set metadata.namespace: {{ .Release.Namespace }} in the template"
    )


def stamp(objects: list[dict[str, Any]], templates: set[str]) -> None:
    """Give each rendered object Helm 4's annotation for its graph's template (in place)."""
    for obj in objects:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            continue
        ann = meta.get("annotations")
        if not isinstance(ann, dict) or HELM_FILENAME in ann:
            continue
        first = str(ann.get(keys.ANN_SOURCE_PATH, "")).split(",")[0]
        if first in templates:
            meta["annotations"] = {**ann, HELM_FILENAME: first}


def split(text: str) -> list[SourceFile]:
    """Group a YAML stream's documents by the template they came from.

    A line starting with ``---`` at column 0 always starts a document (YAML 1.2), so the
    stream can be cut there without parsing it.
    """
    chunks: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines(keepends=True):
        if _DOC_START.match(line) and current:
            chunks.append(current)
            current = []
        current.append(line)
    if current:
        chunks.append(current)
    files: dict[str, list[str]] = {}
    for chunk in chunks:
        body = "".join(chunk)
        if not body.endswith("\n"):
            body += "\n"
        files.setdefault(_source_of(chunk) or STDIN, []).append(body)
    return [SourceFile(path, "".join(parts)) for path, parts in files.items()]
