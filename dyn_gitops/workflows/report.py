"""Diff reports: plain text for a terminal, Markdown for a pull-request comment.

Markdown stays under GitHub's comment limit (65,536 characters): past
:data:`MARKDOWN_LIMIT` the YAML of added objects is left out first, then whole objects,
and the report says so.

Every string that comes from the input (names, kinds, namespaces, field paths, values,
revisions, YAML) is made inert before it reaches the Markdown, so a hostile value cannot
close a code block, open a comment or ``<details>``, add a heading or a link, or hide a
later change: one line each (:func:`~dyn_gitops.display.printable`); HTML cells and titles
entity-encode every character Markdown or HTML would act on; code spans and fenced blocks
use a fence longer than any backtick run inside. Secret values are redacted (``diff.py``).
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from ..display import REDACTED, count, printable, redact_tree
from ..emit import to_yaml
from .diff import ABSENT, DiffResult, FieldChange, ObjectChange, object_key

MARKDOWN_LIMIT = 60_000
_MARK = {"added": "+", "removed": "-", "changed": "~", "replaced": "~"}


def _value(v: Any) -> str:
    if v is ABSENT:
        return "(absent)"
    if isinstance(v, str) and v == REDACTED:
        return REDACTED
    return printable(json.dumps(v, ensure_ascii=False, sort_keys=False, default=str))


def _title(c: ObjectChange) -> str:
    meta = ((c.before if c.status == "replaced" else c.obj) or {}).get("metadata") or {}
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    name = f"{where}{meta.get('name')}"
    if c.status == "replaced":
        assert c.after is not None
        name += f" -> {c.after['metadata']['name']} (new worker generation)"
    return f"{c.obj.get('kind')} {name}"


def summary(d: DiffResult) -> str:
    parts = [f"{d.count(s)} {s}" for s in ("changed", "replaced", "added", "removed") if d.count(s)]
    return ", ".join(parts) if parts else "no differences"


def _revs(d: DiffResult) -> str:
    return printable(
        f"{d.base.rev} ({d.base.commit[:12]}) -> {d.head.rev} ({d.head.commit[:12]}), path {d.path}"
    )


# ---------------------------------------------------------------------------- text
def _text_field(f: FieldChange) -> str:
    path = printable(f.path)
    if f.before is ABSENT:
        return f"    + {path}: {_value(f.after)}"
    if f.after is ABSENT:
        return f"    - {path}: {_value(f.before)}"
    return f"    ~ {path}: {_value(f.before)} -> {_value(f.after)}"


def text(d: DiffResult) -> str:
    lines = [
        f"dyn-gitops diff {_revs(d)}",
        f"{summary(d)}; {count(d.unchanged, 'object')} unchanged",
        "",
    ]
    for c in d.changes:
        lines.append(printable(f"{_MARK[c.status]} {_title(c)}"))
        lines += [_text_field(f) for f in c.fields]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------- markdown
#: what Markdown (GitHub flavoured: table cells, code spans, escapes, emphasis, links and
#: images, strikethrough, math) would act on inside a cell or a title; written as character
#: references instead (HTML's own ``<>&`` are escaped by html.escape)
_MD_ACTIVE = str.maketrans({c: f"&#{ord(c)};" for c in "|`\\*_[~$"})
#: names shown as they are (the usual Kubernetes names); anything else goes in <code>
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9./ -]*")


def _inert(text: str) -> str:
    """``text`` as HTML that Markdown leaves alone: one line, nothing active."""
    return html.escape(printable(text), quote=False).translate(_MD_ACTIVE)


def _code(v: Any, *, raw: bool = False) -> str:
    if v is ABSENT:
        return "<i>absent</i>"
    return "<code>" + _inert(str(v) if raw else _value(v)) + "</code>"


def _name(text: Any) -> str:
    """A kind, namespace or name: as is when plain, else inert in <code>."""
    shown = str(text)
    return shown if _PLAIN.fullmatch(shown) else _code(shown, raw=True)


def _span(text: str) -> str:
    """An inline code span no backtick run inside can close."""
    shown = printable(text)
    fence = "`" * (max((len(r) for r in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown[:1] in ("`", " ", "") or shown[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def _fenced(text: str, info: str) -> list[str]:
    """A fenced code block no line inside can close, one visible line per line."""
    lines = [printable(line) for line in text.split("\n")]
    longest = max((len(r) for r in re.findall("`+", "\n".join(lines))), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", *lines, fence]


def _md_title(c: ObjectChange) -> str:
    meta = ((c.before if c.status == "replaced" else c.obj) or {}).get("metadata") or {}
    where = f"{_name(meta['namespace'])}/" if meta.get("namespace") else ""
    title = f"{_MARK[c.status]} {_name(c.obj.get('kind'))} {where}{_name(meta.get('name'))}"
    if c.status == "replaced":
        assert c.after is not None
        title += f" -&gt; {_name(c.after['metadata']['name'])} (new worker generation)"
    return title


def _md_section(c: ObjectChange, with_yaml: bool) -> str:
    body = [f"<details><summary>{_md_title(c)}</summary>", ""]
    if c.fields:
        body += ["| Field | Before | After |", "| --- | --- | --- |"]
        body += [
            f"| {_code(f.path, raw=True)} | {_code(f.before)} | {_code(f.after)} |"
            for f in c.fields
        ]
    elif c.status == "added" and with_yaml:
        shown = redact_tree(c.obj, kind=object_key(c.obj)[1])
        body += _fenced(to_yaml([shown]).removeprefix("---\n").rstrip(), "yaml")
    else:
        body += ["(YAML left out to stay under the comment size limit)"]
    return "\n".join([*body, "", "</details>"])


def markdown(d: DiffResult, *, limit: int = MARKDOWN_LIMIT) -> str:
    head = [
        f"### dyn-gitops diff {_span(d.base.rev)} → {_span(d.head.rev)}",
        "",
        f"Rendered {_span(d.path)} at {_span(d.base.commit[:12])} and "
        f"{_span(d.head.commit[:12])}: **{summary(d)}**, {count(d.unchanged, 'object')} unchanged.",
    ]
    if d.equal:
        return "\n".join(head) + "\n"
    table = ["", "| | Kind | Namespace | Name | Fields |", "| :-: | --- | --- | --- | --: |"]
    for c in d.changes:
        meta = ((c.before if c.status == "replaced" else c.obj) or {}).get("metadata") or {}
        name = _name(meta.get("name"))
        if c.status == "replaced":
            assert c.after is not None
            name += " → " + _name(c.after["metadata"]["name"])
        ns = _name(meta["namespace"]) if meta.get("namespace") else ""
        table.append(
            f"| {_MARK[c.status]} | {_name(c.obj.get('kind'))} | "
            f"{ns} | {name} | {len(c.fields) or ''} |"
        )
    top = "\n".join(head + table) + "\n"
    for with_yaml in (True, False):
        sections = [_md_section(c, with_yaml) for c in d.changes if c.status != "removed"]
        if len(top) + sum(len(s) + 2 for s in sections) <= limit:
            return top + "\n" + "\n\n".join(sections) + "\n"
    kept: list[str] = []
    size = len(top) + 200
    for s in sections:
        if size + len(s) + 2 > limit:
            break
        kept.append(s)
        size += len(s) + 2
    left = len(sections) - len(kept)
    command = f"dyn-gitops diff --base {d.base.rev} --head {d.head.rev} {d.path}"
    note = (
        f"_{left} more objects are not shown here (comment size limit); run "
        f"{_span(command)} locally._"
    )
    return top + "\n" + "\n\n".join([*kept, note]) + "\n"
