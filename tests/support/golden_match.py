"""The Dynamo operator's golden-manifest matcher, ported: a YAML contract (``output.yaml``)
against the objects a controller made.

Behaviour of ``deploy/operator/internal/testing/golden/{match,node}.go`` and its
``DESIGN.md`` at upstream ``2a6da14c8`` (ai-dynamo/dynamo #12009):

- every expected document is one object; for each apiVersion+kind in the contract the
  actual objects of that kind must be exactly the expected set: each expected document
  matches exactly one actual object, no two documents claim the same object, and (once all
  matched) an actual object no document claims is unexpected;
- mappings are strict (an actual field the contract leaves out is an error) unless the
  mapping says ``$strict: false`` (only that mapping; ``$$strict`` names a real ``$strict``);
- scalar directives: ``$ignore`` / ``$exists`` (the field exists, any scalar value),
  ``$notexists`` (absent), ``$glob:<glob>`` (Go ``path.Match``), ``$pattern:<regexp>``
  (anchored), ``$var:<name>`` (exactly the caller's value, and a string);
- mapping directives: a one-key mapping ``{$ignore: true}`` / ``{$exists: true}`` (the field
  is a mapping) or ``{$notexists: true}``;
- sequences match entry by entry, in order; other scalars compare by decoded value and type
  (``"1"`` is not ``1``, ``1`` is not ``1.0``).

The contract is read as Go's yaml.v3 reads it (YAML 1.2 core: only ``true``/``false`` are
booleans, ``n`` or ``on`` are strings). Not ported: writing the adapted ``output.yaml.new``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

Obj = dict[str, Any]
Variables = Mapping[str, str]

IGNORE = "$ignore"
EXISTS = "$exists"
NOTEXISTS = "$notexists"
STRICT = "$strict"
ESCAPED_STRICT = "$$strict"
_MAPPING_DIRECTIVES = (IGNORE, EXISTS, NOTEXISTS)


class MatchError(Exception):
    """The first place where an actual object breaks the contract (``path: reason``)."""


class _Var(str):
    """A ``$var:<name>`` resolved to the caller's value: matched exactly, as a string."""

    name: str

    def __new__(cls, value: str, name: str) -> _Var:
        out = super().__new__(cls, value)
        out.name = name
        return out


# ----------------------------------------------------------------------------------- reading
class _CoreLoader(yaml.SafeLoader):
    """YAML 1.2 core schema scalars, as go.yaml.in/yaml/v3 resolves them."""


_CoreLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:bool",)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_CoreLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def _core_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    return str(loader.construct_scalar(node)).lower() == "true"


_CoreLoader.add_constructor("tag:yaml.org,2002:bool", _core_bool)


def load_documents(text: str) -> list[Obj]:
    """The contract's documents (empty ones skipped); each needs apiVersion and kind."""
    docs = [d for d in yaml.load_all(text, Loader=_CoreLoader) if d is not None]
    for i, doc in enumerate(docs, 1):
        if not isinstance(doc, dict):
            raise ValueError(f"document {i}: manifest root must be a mapping")
        for field in ("apiVersion", "kind"):
            if not isinstance(doc.get(field), str):
                raise ValueError(f"document {i}: {field} is required")
    if not docs:
        raise ValueError("golden manifest file contains no objects")
    return docs


def resolve_variables(node: Any, variables: Variables) -> Any:
    """``node`` with every ``$var:<name>`` scalar replaced by the caller's value (a whole
    scalar only; no interpolation). An unknown name is an error."""
    if isinstance(node, str) and not isinstance(node, _Var) and node.startswith("$var:"):
        name = node.removeprefix("$var:")
        if name not in variables:
            raise KeyError(f"unknown variable {name!r}")
        return _Var(variables[name], name)
    if isinstance(node, dict):
        return {k: resolve_variables(v, variables) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve_variables(v, variables) for v in node]
    return node


# ---------------------------------------------------------------------------------- matching
def _kind(node: Any) -> str:
    if isinstance(node, dict):
        return "mapping"
    if isinstance(node, list):
        return "sequence"
    return "scalar"


def _mapping_directive(node: Any, path: str) -> str | None:
    if not isinstance(node, dict) or len(node) != 1:
        return None
    ((name, value),) = node.items()
    if name not in _MAPPING_DIRECTIVES:
        return None
    if value is not True:
        raise MatchError(f"{path}: directive {name} must be true")
    return str(name)


def _is_notexists(node: Any) -> bool:
    if isinstance(node, str) and not isinstance(node, _Var) and node == NOTEXISTS:
        return True
    try:
        return _mapping_directive(node, "") == NOTEXISTS
    except MatchError:
        return False


def match(expected: Any, actual: Any, path: str = "$") -> None:
    """Raise :class:`MatchError` where ``actual`` breaks the contract ``expected``."""
    directive = _mapping_directive(expected, path)
    if directive in (IGNORE, EXISTS):
        if not isinstance(actual, dict):
            raise MatchError(f"{path}: expected a mapping")
        return
    if directive == NOTEXISTS:
        raise MatchError(f"{path}: field exists")
    if _kind(expected) != _kind(actual):
        raise MatchError(f"{path}: node is a {_kind(actual)}, want a {_kind(expected)}")
    if isinstance(expected, dict):
        _match_mapping(expected, actual, path)
    elif isinstance(expected, list):
        if len(expected) != len(actual):
            raise MatchError(f"{path}: sequence has {len(actual)} entries, want {len(expected)}")
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            match(e, a, f"{path}[{i}]")
    else:
        _match_scalar(expected, actual, path)


def _strict(expected: Obj, path: str) -> bool:
    if STRICT not in expected:
        return True
    value = expected[STRICT]
    if not isinstance(value, bool):
        raise MatchError(f"{path}: directive {STRICT} must be a boolean")
    return value


def _fields(expected: Obj) -> Obj:
    out = {}
    for name, value in expected.items():
        if name == STRICT:
            continue
        out[STRICT if name == ESCAPED_STRICT else name] = value
    return out


def _match_mapping(expected: Obj, actual: Obj, path: str) -> None:
    strict = _strict(expected, path)
    fields = _fields(expected)
    for name, want in fields.items():
        where = f"{path}.{name}"
        if name not in actual:
            if _is_notexists(want):
                continue
            raise MatchError(f"{where}: field does not exist")
        if _is_notexists(want):
            raise MatchError(f"{where}: field exists")
        match(want, actual[name], where)
    if strict:
        for name in actual:
            if name not in fields or _is_notexists(fields[name]):
                raise MatchError(f"{path}.{name}: unexpected field")


def _glob(pattern: str) -> re.Pattern[str]:
    """Go ``path.Match``: ``*`` and ``?`` stop at ``/``, ``[...]`` classes (``^`` negates),
    backslash escapes; as a regular expression."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            negate = pattern[i + 1 : i + 2] == "^"
            start = i + 2 if negate else i + 1
            end = pattern.find("]", start + 1)  # a class is never empty: "[]]" is "]"
            if end < 0:
                raise MatchError(f"invalid glob {pattern!r}")
            body = pattern[start:end].replace("]", "\\]").replace("[", "\\[")
            out.append(("[^" if negate else "[") + body + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _same_scalar(expected: Any, actual: Any) -> bool:
    """Go's DeepEqual of the decoded values: the type counts (bool is not int)."""
    return type(expected) is type(actual) and expected == actual


def _match_scalar(expected: Any, actual: Any, path: str) -> None:
    if isinstance(expected, _Var):
        if not isinstance(actual, str):
            raise MatchError(f"{path}: variable {expected.name} requires a string")
        if str(expected) != actual:
            raise MatchError(f"{path}: value is {actual!r}, want {str(expected)!r}")
        return
    if isinstance(expected, str):
        if expected in (IGNORE, EXISTS):
            return  # a scalar (the kinds already agree)
        if expected == NOTEXISTS:
            raise MatchError(f"{path}: field exists")
        for prefix in ("$glob:", "$pattern:"):
            if not expected.startswith(prefix):
                continue
            if not isinstance(actual, str):
                raise MatchError(f"{path}: {prefix[1:-1]} requires a string")
            body = expected.removeprefix(prefix)
            rx = _glob(body) if prefix == "$glob:" else re.compile(f"(?:{body})")
            if not rx.fullmatch(actual):
                raise MatchError(f"{path}: {actual!r} does not match {prefix[1:-1]} {body!r}")
            return
    if not _same_scalar(expected, actual):
        raise MatchError(f"{path}: value is {actual!r}, want {expected!r}")


def explain(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Every place ``actual`` breaks the contract, not only the first (for reports; the
    matcher itself stops at the first)."""
    try:
        match(expected, actual, path)
    except MatchError as exc:
        first = str(exc)
    else:
        return []
    both_maps = isinstance(expected, dict) and isinstance(actual, dict)
    if both_maps and _mapping_directive(expected, path) is None:
        out: list[str] = []
        fields = _fields(expected)
        for name, want in fields.items():
            where = f"{path}.{name}"
            if name in actual and not _is_notexists(want):
                out.extend(explain(want, actual[name], where))
            elif (name in actual) == _is_notexists(want):
                out.append(f"{where}: field {'exists' if name in actual else 'does not exist'}")
        if _strict(expected, path):
            out.extend(
                f"{path}.{n}: unexpected field"
                for n in actual
                if n not in fields or _is_notexists(fields[n])
            )
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            e
            for i, (x, y) in enumerate(zip(expected, actual, strict=True))
            for e in explain(x, y, f"{path}[{i}]")
        ]
    return [first]


# ------------------------------------------------------------------------------ object sets
@dataclass(frozen=True)
class Result:
    mismatches: list[str]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _gvk(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(obj.get("apiVersion")), str(obj.get("kind"))


def _name(obj: Mapping[str, Any]) -> Any:
    meta = obj.get("metadata")
    return meta.get("name") if isinstance(meta, dict) else None


def _error(expected: Any, actual: Any) -> str | None:
    try:
        match(expected, actual)
    except MatchError as exc:
        return str(exc)
    return None


def compare(
    expected: Iterable[Obj],
    actual: Iterable[Obj],
    namespace: str,
    variables: Variables | None = None,
) -> Result:
    """Every expected document against the actual objects of its kind in ``namespace``
    (``compare`` of match.go); the mismatches, each naming the object and, for an object of
    the expected name, the first place it differs."""
    docs = [resolve_variables(d, variables or {}) for d in expected]
    objs = [
        o for o in actual if ((o.get("metadata") or {}).get("namespace") or namespace) == namespace
    ]
    mismatches: list[str] = []
    for gvk in sorted({_gvk(d) for d in docs}):
        want = [d for d in docs if _gvk(d) == gvk]
        have = sorted((o for o in objs if _gvk(o) == gvk), key=lambda o: str(_name(o)))
        claimed: dict[int, int] = {}
        all_matched = True
        for i, doc in enumerate(want):
            desc = f"{gvk[1]} {namespace}/{_name(doc)}"
            found = [j for j, o in enumerate(have) if _error(doc, o) is None]
            if not found:
                all_matched = False
                named = [o for o in have if _error(_name(doc), _name(o)) is None]
                if "name" not in (doc.get("metadata") or {}):
                    named = have
                if not named:
                    mismatches.append(f"{desc} has not appeared")
                else:
                    mismatches.append(
                        f"{desc} does not match {gvk[1]} {_name(named[0])}: {_error(doc, named[0])}"
                    )
                continue
            if len(found) > 1:
                all_matched = False
                names = ", ".join(str(_name(have[j])) for j in found)
                mismatches.append(f"{desc} matches {len(found)} objects, want exactly one: {names}")
                continue
            if found[0] in claimed:
                all_matched = False
                mismatches.append(
                    f"{desc} and document {claimed[found[0]] + 1} match the same object"
                )
                continue
            claimed[found[0]] = i
        if all_matched:
            mismatches.extend(
                f"unexpected {gvk[1]} {namespace}/{_name(o)} is present"
                for j, o in enumerate(have)
                if j not in claimed
            )
    return Result(mismatches)
