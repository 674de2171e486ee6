"""A fast block-style YAML writer for JSON-shaped data (dict, list, str, int, float, bool,
None), used for every rendered object.

PyYAML's representer is pure Python even with libyaml and dominated render time (80 % at
1,000 graphs). This writer uses PyYAML's own resolver to decide when a string must be
quoted, so ``yaml.safe_load(dump(x)) == x``; anything else (timestamps in pass-through
objects, binary) falls back to PyYAML for that document.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import yaml

try:
    from yaml import CSafeDumper as _BaseDumper
except ImportError:  # pragma: no cover
    from yaml import SafeDumper as _BaseDumper  # type: ignore[assignment]


class _Dumper(_BaseDumper):
    """PyYAML's dumper for the fallback path; strings Go would not read back as strings
    are single-quoted (``go_reads_as_non_string``)."""


_PLAIN = re.compile(r"^[A-Za-z0-9_./][-A-Za-z0-9_./:=,@+]*$")
# Go's YAML reader (go-yaml v2/v3 behind sigs.k8s.io/yaml, kyaml: kubectl, Argo CD, Flux,
# Helm, kustomize) resolves more plain scalars than PyYAML. Ported from go-yaml's
# resolve(): y/Y/n/N are booleans; a scalar starting with a digit, sign or dot is, with its
# underscores removed, an integer if strconv.ParseInt(s, 0, 64) takes it (0x1F, 0o17, 0b1,
# 017) and a float if it matches yamlStyleFloat, so 06416192, 1., 1e5 and 99999999999999999999
# are numbers to Go and strings to PyYAML; a date with one-digit month or day
# (2006-1-2) is a timestamp. Quoting more than Go needs is harmless; less is a wrong type.
_GO_BOOLS = frozenset("yYnN")
_GO_NUMBER = re.compile(
    r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?0[oObBxX][0-9a-fA-F]+"
)
_GO_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ].*)?", re.DOTALL)


def go_reads_as_non_string(value: str) -> bool:
    """Whether Go's YAML reader takes the plain scalar ``value`` for a non-string."""
    if value in _GO_BOOLS:
        return True
    if not value or value[0] not in "+-.0123456789":
        return False
    return bool(_GO_NUMBER.fullmatch(value.replace("_", "")) or _GO_TIMESTAMP.fullmatch(value))


_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"
# printable and no YAML line breaks (NEL, LS, PS): x20-x7e, a0-2027, 202a-d7ff, e000-fefe,
# ff00-fffd. Written as the characters outside that set: re compiles a class of few short
# ranges at once, but spends milliseconds of every start mapping long ones char by char.
_NOT_PRINTABLE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff"
    r"\U00010000-\U0010ffff]"
)


def _printable(value: str) -> bool:
    return _NOT_PRINTABLE.search(value) is None


_NEEDS_ESCAPE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _represent_str(dumper: _Dumper, value: str) -> yaml.ScalarNode:
    style = "'" if go_reads_as_non_string(value) else None
    return dumper.represent_scalar(_STR_TAG, value, style=style)


_Dumper.add_representer(str, _represent_str)


def _double_quoted(value: str) -> str:
    """JSON's escaping is valid YAML; characters YAML readers refuse raw are escaped too."""
    return _NEEDS_ESCAPE.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False)
    )


class _Fallback(Exception):
    pass


@lru_cache(maxsize=65536)
def _scalar_str(value: str) -> str:
    if (
        value
        and _PLAIN.fullmatch(value)
        and not value.endswith(":")
        and not go_reads_as_non_string(value)
        and (
            _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
            == _STR_TAG
        )
    ):
        return value
    if _printable(value):
        return "'" + value.replace("'", "''") + "'"
    return _double_quoted(value)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return _scalar_str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _Fallback
        mantissa, e, exponent = repr(value).partition("e")
        if "." not in mantissa:  # YAML 1.1 floats need a dot (and a signed exponent)
            mantissa += ".0"
        return mantissa + (e + exponent if e else "")
    raise _Fallback


def _block(value: str, indent: str) -> str | None:
    """A literal block for a multi-line string, when it round-trips exactly."""
    if not _printable(value.replace("\n", "")) or value.startswith((" ", "\n")):
        return None
    lines = value.split("\n")
    if any(line != line.rstrip(" ") for line in lines) or "\t" in value:
        return None
    if value.endswith("\n\n"):
        return None
    chomp = "" if value.endswith("\n") else "-"
    body = lines[:-1] if value.endswith("\n") else lines
    return f"|{chomp}\n" + "\n".join((indent + ln) if ln else "" for ln in body)


#: what a string is written as: a key (with its ``:``), a value; bounded (hostile input)
_KEYS: dict[str, str] = {}
_VALUES: dict[str, str] = {}
_CACHED = 65536


def _key(k: Any) -> str:
    """``key:`` for a mapping key (a string's kept in ``_KEYS``)."""
    if type(k) is not str:
        return _scalar(k) + ":"
    if len(_KEYS) >= _CACHED:
        _KEYS.clear()
    key = _KEYS[k] = _scalar_str(k) + ":"
    return key


def _value(v: str) -> str:
    """A one-line string value as written (kept in ``_VALUES``)."""
    if len(_VALUES) >= _CACHED:
        _VALUES.clear()
    text = _VALUES[v] = _scalar_str(v)
    return text


def _write(value: Any, indent: str, out: list[str], first: str | None = None) -> None:
    """Append lines for a mapping or sequence ``value`` at ``indent``; ``first`` replaces
    the indent of the first line (an item of a block sequence: ``- key: value``). Strings,
    the most common value, are written inline. This runs once per output line: keys and
    string values are looked up in plain dicts before anything is computed."""
    child = indent + "  "
    if isinstance(value, dict):
        for k, v in value.items():
            key = _KEYS.get(k) if type(k) is str else None
            if key is None:
                key = _key(k)
            if first is None:
                head = indent + key
            else:
                head, first = first + key, None
            if type(v) is str and "\n" not in v:
                text = _VALUES.get(v)
                if text is None:
                    text = _value(v)
                out.append(f"{head} {text}")
            elif isinstance(v, dict) and v:
                out.append(head)
                _write(v, child, out)
            elif isinstance(v, list) and v:
                out.append(head)
                _write(v, indent, out)  # block sequences sit at the key's indent
            else:
                out.append(_leaf(head, v, child))
    else:
        for v in value:
            if first is None:
                head = indent + "-"
            else:
                head, first = first + "-", None
            if type(v) is str and "\n" not in v:
                text = _VALUES.get(v)
                if text is None:
                    text = _value(v)
                out.append(f"{head} {text}")
            elif isinstance(v, dict | list) and v:
                _write(v, child, out, head + " ")
            else:
                out.append(_leaf(head, v, child))


def _leaf(head: str, v: Any, child: str) -> str:
    """The line of a scalar, an empty collection or a multi-line string (as a literal
    block when it round-trips)."""
    if isinstance(v, dict):
        return head + " {}"
    if isinstance(v, list):
        return head + " []"
    if isinstance(v, str) and "\n" in v:
        block = _block(v, child)
        return f"{head} {block if block is not None else _scalar(v)}"
    return f"{head} {_scalar(v)}"


def dump_document(obj: Any) -> str:
    """One ``---`` document."""
    if isinstance(obj, dict | list) and obj:
        try:
            lines: list[str] = []
            _write(obj, "", lines)
            return "---\n" + "\n".join(lines) + "\n"
        except _Fallback:
            pass
    text: str = yaml.dump(
        obj,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,
        explicit_start=True,
    )
    return text


def dump_all(objects: list[Any]) -> str:
    return "".join(dump_document(o) for o in objects)
