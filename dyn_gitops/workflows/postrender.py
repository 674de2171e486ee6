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
from ..parse import load_bounded
from ..read import SourceFile

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
