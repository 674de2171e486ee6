"""Go ``encoding/json`` bytes for a value of a known Go type, from its parsed JSON form.

The worker hash is SHA-256 over ``json.Marshal`` of Go structs, so the bytes must be Go's:
struct fields in declaration order (``golayout``), fields that are absent from the data
but not ``omitempty`` written as their Go zero value (``"resources":{}``,
``"name":""``), ``omitempty``/``omitzero`` honoured, map keys sorted, quantities
canonical, and strings escaped as Go escapes them (``<``, ``>``, ``&``, U+2028/U+2029).
Keys the Go type does not have are dropped, as the API server prunes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any, NamedTuple

from .. import memo
from . import golayout
from .quantity import canonical

# Go escapes what the stdlib's JSON string encoder does (\b \f \n \r \t, other control
# characters as \u00xx, lowercase) plus these, HTML-safe: translated after encoding.
_HTML = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)
_NEEDS_HTML = re.compile("[<>&\u2028\u2029]")


class GoTypeError(ValueError):
    """The data does not fit the Go type (an input the API server would refuse); ``path``
    is where, in the value encoded."""

    def __init__(self, reason: str, path: tuple[str | int, ...] = ()) -> None:
        self.reason, self.path = reason, path
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        super().__init__(f"{where}: {reason}" if where else reason)


@lru_cache(maxsize=65536)
def string(text: str) -> str:
    """A Go-encoded JSON string. Cached: the specs of a run repeat the same names and
    values (``str.translate`` with a mapping walks the string char by char, so it only
    runs on the few strings that need it)."""
    encoded = encode_basestring(text)
    return encoded.translate(_HTML) if _NEEDS_HTML.search(encoded) else encoded


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
    if kind.endswith("v1alpha1.ExtraPodSpec"):
        return _extra_pod_spec(value)
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


Encoder = Callable[[Any], str]
_ENCODERS: dict[str, Encoder] = {}


def encode(kind: str, value: Any) -> str:
    """Go's ``json.Marshal`` of ``value`` typed ``kind`` (a ``golayout`` type reference);
    ``None`` is the Go zero value."""
    if kind.startswith("struct:") and value:
        return _encode_struct(kind, value)
    return encoder(kind)(value)


@memo.by_repr  # the specs of a repository's services repeat (field by field is dear)
def _encode_struct(kind: str, value: Any) -> str:
    return encoder(kind)(value)


def encoder(kind: str) -> Encoder:
    """The encoding function of ``kind``, built once (the hash encodes many specs)."""
    fn = _ENCODERS.get(kind)
    if fn is None:
        fn = _ENCODERS[kind] = _build(kind)
    return fn


def _int(value: Any) -> str:
    if value is None:
        return "0"
    if isinstance(value, bool) or not isinstance(value, int):
        raise GoTypeError(f"expected an integer, found {value!r}")
    return str(value)


def _build(kind: str) -> Encoder:
    head, _, rest = kind.partition(":")
    if head == "ptr":
        inner = encoder(rest)
        return lambda v: "null" if v is None else inner(v)
    if head == "string":
        return lambda v: string("" if v is None else str(v))
    if head == "bool":
        return lambda v: "true" if v else "false"
    if head == "int":
        return _int
    if head == "float":
        return lambda v: "0" if v is None else _float(float(v))
    if head == "slice":
        return _slice(encoder(rest))
    if head == "map":
        return _map(encoder(rest))
    if head == "struct":
        return lambda v: "{" + ",".join(_fields(rest, v)) + "}"
    if head == "marshaler":
        return lambda v: _marshaler(rest, v)
    if head == "bytes":
        raise GoTypeError("byte slices are not expected in a DCD spec")
    return _any


def _slice(item: Encoder) -> Encoder:
    def enc(value: Any) -> str:
        if value is None:
            return "null"
        if not isinstance(value, list):
            raise GoTypeError(f"expected a list, found {type(value).__name__}")
        try:
            return "[" + ",".join(map(item, value)) + "]"
        except GoTypeError:  # again, item by item, to say which one (encoders are pure)
            for i, v in enumerate(value):
                try:
                    item(v)
                except GoTypeError as exc:
                    raise GoTypeError(exc.reason, (i, *exc.path)) from None
            raise

    return enc


def _map(item: Encoder) -> Encoder:
    def enc(value: Any) -> str:
        if value is None:
            return "null"
        if not isinstance(value, dict):
            raise GoTypeError(f"expected a mapping, found {type(value).__name__}")
        return "{" + ",".join(f"{string(str(k))}:{item(value[k])}" for k in sorted(value)) + "}"

    return enc


#: per struct field: (``"name":`` prefix, name, encoder, whether a set value is left out
#: (``omitempty``/``omitzero``; None: never), dropped when absent)
_Entry = tuple[str, str, Encoder, Callable[[Any], bool] | None, bool]
_Plan = tuple[_Entry, ...]
#: distinct key sets of one struct type whose field order is kept (a bound for hostile
#: input; a render meets a handful)
_MAX_ORDERS = 1024


class _Layout(NamedTuple):
    """A struct's encoding plan: every field in declaration order, where each field's
    JSON name sits in it, the fields written even when absent (Go's zero value), and per
    set of keys met so far the entries to write, in order."""

    plan: _Plan
    position: dict[str, int]
    always: frozenset[int]
    orders: dict[tuple[str, ...], _Plan]


_LAYOUTS: dict[str, _Layout] = {}


def _omitter(kind: str, omitempty: bool, omitzero: bool) -> Callable[[Any], bool] | None:
    """Whether a set (not None) value of field type ``kind`` is left out: Go's
    ``omitempty`` (:func:`_is_empty`) and ``omitzero`` (:func:`_is_zero`)."""
    if omitzero:
        return lambda v: (omitempty and _is_empty(kind, v)) or _is_zero(kind, v)
    if not omitempty:
        return None
    head = kind.split(":", 1)[0]
    if head in ("slice", "map", "bytes"):
        return lambda v: len(v) == 0
    if head == "string":
        return lambda v: bool(v == "")
    if head in ("int", "float"):
        return lambda v: bool(v == 0)
    if head == "bool":
        return lambda v: v is False
    return None  # structs and non-nil pointers are never empty


def _layout(name: str) -> _Layout:
    layout = _LAYOUTS.get(name)
    if layout is None:
        plan = tuple(
            (
                string(field) + ":",
                field,
                encoder(kind),
                _omitter(kind, omitempty, omitzero),
                omitzero or (omitempty and not kind.startswith(("struct:", "marshaler:"))),
            )
            for field, kind, omitempty, omitzero in golayout.STRUCTS[name]
        )
        position = {entry[1]: i for i, entry in enumerate(plan)}
        always = frozenset(i for i, entry in enumerate(plan) if not entry[4])
        layout = _LAYOUTS[name] = _Layout(plan, position, always, {})
    return layout


def _order(layout: _Layout, keys: tuple[str, ...]) -> _Plan:
    """The entries to write for a value with ``keys``: the fields given or written when
    absent, in declaration order (a struct such as PodSpec has dozens of fields and a value
    sets a few)."""
    position = layout.position
    wanted = layout.always.union([i for i in map(position.get, keys) if i is not None])
    order = tuple(layout.plan[i] for i in sorted(wanted))
    if len(layout.orders) >= _MAX_ORDERS:
        layout.orders.clear()
    layout.orders[keys] = order
    return order


def _fields(name: str, value: Any, skip: str = "") -> list[str]:
    """The encoded ``"name":value`` members of struct ``name`` (field ``skip`` left out)."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise GoTypeError(f"expected a mapping for {name}, found {type(value).__name__}")
    layout = _layout(name)
    keys = tuple(value)
    order = layout.orders.get(keys)
    if order is None:
        order = _order(layout, keys)
    parts = []
    for prefix, field, enc, omit, drop_absent in order:
        if field == skip:
            continue
        item = value.get(field)
        if item is None:
            if drop_absent:
                continue
        elif omit is not None and omit(item):
            continue
        try:
            parts.append(prefix + enc(item))
        except GoTypeError as exc:
            raise GoTypeError(exc.reason, (field, *exc.path)) from None
    return parts


def _extra_pod_spec(value: Any) -> str:
    """v1alpha1 ``ExtraPodSpec.MarshalJSON`` (``api/v1alpha1/common.go``): the embedded
    PodSpec's fields (only when decoding allocated it: some field was given), then
    ``containers`` and ``mainContainer``, both omitted when empty."""
    value = value if isinstance(value, dict) else {}
    pod = {k: v for k, v in value.items() if k != "mainContainer"}
    parts = _fields("core/v1.PodSpec", pod, skip="containers") if pod else []
    if pod.get("containers"):
        parts.append('"containers":' + encode("slice:struct:core/v1.Container", pod["containers"]))
    if value.get("mainContainer") is not None:
        parts.append(
            '"mainContainer":' + encode("struct:core/v1.Container", value["mainContainer"])
        )
    return "{" + ",".join(parts) + "}"
