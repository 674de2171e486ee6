"""Diff reports: plain text for a terminal, Markdown for a pull-request comment.

Markdown stays under GitHub's comment limit (65,536 characters): past
:data:`MARKDOWN_LIMIT` the YAML of added objects is left out first, then whole objects,
and the report says so.
"""

from __future__ import annotations

import html
import json
from typing import Any

from ..emit import to_yaml
from .diff import ABSENT, DiffResult, FieldChange, ObjectChange

MARKDOWN_LIMIT = 60_000
_MARK = {"added": "+", "removed": "-", "changed": "~", "replaced": "~"}


def _value(v: Any) -> str:
    if v is ABSENT:
        return "(absent)"
    return json.dumps(v, ensure_ascii=False, sort_keys=False, default=str)


def _title(c: ObjectChange) -> str:
    meta = ((c.before if c.status == "replaced" else c.obj) or {}).get("metadata") or {}
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    name = f"{where}{meta.get('name')}"
    if c.status == "replaced":
        assert c.after is not None
        name += f" -> {c.after['metadata']['name']} (new worker generation)"
    return f"{c.obj.get('kind')} {name}"


def summary(d: DiffResult) -> str:
    parts = [f"{d.count(s)} {s}" for s in ("changed", "replaced", "added", "removed")
             if d.count(s)]
    return ", ".join(parts) if parts else "no differences"


def _revs(d: DiffResult) -> str:
    return (f"{d.base.rev} ({d.base.commit[:12]}) -> {d.head.rev} ({d.head.commit[:12]}), "
            f"path {d.path}")


# ---------------------------------------------------------------------------- text
def _text_field(f: FieldChange) -> str:
    if f.before is ABSENT:
        return f"    + {f.path}: {_value(f.after)}"
    if f.after is ABSENT:
        return f"    - {f.path}: {_value(f.before)}"
    return f"    ~ {f.path}: {_value(f.before)} -> {_value(f.after)}"


def text(d: DiffResult) -> str:
    lines = [f"dyn-gitops diff {_revs(d)}",
             f"{summary(d)}; {d.unchanged} objects unchanged", ""]
    for c in d.changes:
        lines.append(f"{_MARK[c.status]} {_title(c)}")
        lines += [_text_field(f) for f in c.fields]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------- markdown
def _code(v: Any, *, raw: bool = False) -> str:
    if v is ABSENT:
        return "<i>absent</i>"
    shown = str(v) if raw else _value(v)
    return "<code>" + html.escape(shown, quote=False).replace("|", "&#124;") + "</code>"


def _md_section(c: ObjectChange, with_yaml: bool) -> str:
    title = html.escape(f"{_MARK[c.status]} {_title(c)}")
    body = [f"<details><summary>{title}</summary>", ""]
    if c.fields:
        body += ["| Field | Before | After |", "| --- | --- | --- |"]
        body += [f"| {_code(f.path, raw=True)} | {_code(f.before)} | {_code(f.after)} |"
                 for f in c.fields]
    elif c.status == "added" and with_yaml:
        body += ["```yaml", to_yaml([c.obj]).removeprefix("---\n").rstrip(), "```"]
    else:
        body += ["(YAML left out to stay under the comment size limit)"]
    return "\n".join([*body, "", "</details>"])


def markdown(d: DiffResult, *, limit: int = MARKDOWN_LIMIT) -> str:
    head = [f"### dyn-gitops diff `{d.base.rev}` → `{d.head.rev}`", "",
            f"Rendered `{d.path}` at `{d.base.commit[:12]}` and `{d.head.commit[:12]}`: "
            f"**{summary(d)}**, {d.unchanged} objects unchanged."]
    if d.equal:
        return "\n".join(head) + "\n"
    table = ["", "| | Kind | Namespace | Name | Fields |", "| :-: | --- | --- | --- | --: |"]
    for c in d.changes:
        meta = ((c.before if c.status == "replaced" else c.obj) or {}).get("metadata") or {}
        name = html.escape(str(meta.get("name")))
        if c.status == "replaced":
            assert c.after is not None
            name += " → " + html.escape(str(c.after["metadata"]["name"]))
        table.append(f"| {_MARK[c.status]} | {c.obj.get('kind')} | "
                     f"{meta.get('namespace') or ''} | {name} | {len(c.fields) or ''} |")
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
    note = (f"_{left} more objects are not shown here (comment size limit); run "
            f"`dyn-gitops diff --base {d.base.rev} --head {d.head.rev} {d.path}` locally._")
    return top + "\n" + "\n\n".join([*kept, note]) + "\n"
