"""Go ``encoding/json`` bytes for a value of a known Go type, from its parsed JSON form.

The worker hash is SHA-256 over ``json.Marshal`` of Go structs, so the bytes must be Go's:
struct fields in declaration order (``golayout``), fields that are absent from the data
but not ``omitempty`` written as their Go zero value (``"resources":{}``,
``"name":""``), ``omitempty``/``omitzero`` honoured, map keys sorted, quantities
canonical, and strings escaped as Go escapes them (``<``, ``>``, ``&``, U+2028/U+2029).
Keys the Go type does not have are dropped, as the API server prunes them.
"""

from __future__ import annotations

from typing import Any

from . import golayout
from .quantity import canonical

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


class GoTypeError(ValueError):
    """The data does not fit the Go type (a bug or an input the API server would refuse)."""


def string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch in _HTML:
            out.append(_HTML[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _float(value: float) -> str:
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:  # Go: 1e-07 → 1e-7 style exponents without padding
        mantissa, exp = text.split("e")
        return (
            f"{mantissa}e{exp[0]}{exp[1:].lstrip('0') or '0'}"
            if exp[0] == "-"
            else (f"{mantissa}e+{exp.lstrip('+').lstrip('0') or '0'}")
        )
    return text


def _any(value: Any) -> str:
    """An untyped value (``interface{}`` or raw JSON): Go sorts object keys."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return string(value)
    if isinstance(value, list):
        return "[" + ",".join(_any(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{string(str(k))}:{_any(value[k])}" for k in sorted(value)) + "}"
    raise GoTypeError(f"cannot encode {type(value).__name__}")


def _marshaler(kind: str, value: Any) -> str:
    if kind.endswith("resource.Quantity"):
        if value is None:
            return '"0"'
        return string(canonical(str(value)))
    if kind.endswith("intstr.IntOrString"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return "0" if value is None else _any(value)
        return str(value) if isinstance(value, int) else string(value)
    if kind.endswith("v1.Time"):
        return "null" if value in (None, "") else string(str(value))
    if kind.endswith("v1.Duration"):
        return string("0s" if value is None else str(value))
    return _any(value)  # raw JSON: apiextensions JSON, json.RawMessage, FieldsV1


def _is_empty(kind: str, value: Any) -> bool:
    """Go's ``omitempty``: false, 0, "", nil pointer/interface, empty slice or map."""
    if value is None:
        return not kind.startswith(("struct:", "marshaler:"))
    head = kind.split(":", 1)[0]
    if head in ("slice", "map", "bytes"):
        return len(value) == 0
    if head == "string":
        return bool(value == "")
    if head in ("int", "float"):
        return bool(value == 0)
    if head == "bool":
        return value is False
    return False  # structs and non-nil pointers are never empty


def _is_zero(kind: str, value: Any) -> bool:
    """Go's ``omitzero`` for the types that use it here (``metav1.Time``: IsZero)."""
    if value is None:
        return True
    if kind.endswith("v1.Time"):
        return bool(value == "")
    return _is_empty(kind, value)


def encode(kind: str, value: Any) -> str:
    """Go's ``json.Marshal`` of ``value`` typed ``kind`` (a ``golayout`` type reference);
    ``None`` is the Go zero value."""
    head, _, rest = kind.partition(":")
    if head == "ptr":
        return "null" if value is None else encode(rest, value)
    if head == "string":
        return string("" if value is None else str(value))
    if head == "bool":
        return "true" if value else "false"
    if head == "int":
        if value is None:
            return "0"
        if isinstance(value, bool) or not isinstance(value, int):
            raise GoTypeError(f"expected an integer, found {value!r}")
        return str(value)
    if head == "float":
        return "0" if value is None else _float(float(value))
    if head == "slice":
        if value is None:
            return "null"
        if not isinstance(value, list):
            raise GoTypeError(f"expected a list, found {type(value).__name__}")
        return "[" + ",".join(encode(rest, v) for v in value) + "]"
    if head == "map":
        if value is None:
            return "null"
        if not isinstance(value, dict):
            raise GoTypeError(f"expected a mapping, found {type(value).__name__}")
        return (
            "{"
            + ",".join(f"{string(str(k))}:{encode(rest, value[k])}" for k in sorted(value))
            + "}"
        )
    if head == "struct":
        return _struct(rest, value)
    if head == "marshaler":
        return _marshaler(rest, value)
    if head == "bytes":
        raise GoTypeError("byte slices are not expected in a DCD spec")
    return _any(value)


def _struct(name: str, value: Any) -> str:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise GoTypeError(f"expected a mapping for {name}, found {type(value).__name__}")
    parts = []
    for field, kind, omitempty, omitzero in golayout.STRUCTS[name]:
        item = value.get(field)
        if (omitempty and _is_empty(kind, item)) or (omitzero and _is_zero(kind, item)):
            continue
        parts.append(f"{string(field)}:{encode(kind, item)}")
    return "{" + ",".join(parts) + "}"


def dumps_sorted(value: Any) -> str:
    """``json.Marshal`` of an untyped Go value (maps sorted)."""
    return _any(value)
