"""A Kubernetes quantity in the canonical spelling Go's ``resource.Quantity`` marshals to.

The worker hash encodes quantities as the operator does, so ``0.5`` must hash as ``500m``
and ``1536Mi`` stays ``1536Mi`` while ``2048Mi`` becomes ``2Gi``. Behaviour follows
``k8s.io/apimachinery/pkg/api/resource`` (``ParseQuantity`` then ``CanonicalizeBytes``):
the suffix family of the input is kept (binary, decimal or exponent), binary falls back to
decimal below 1024 or for fractions, and the number is the smallest integer mantissa whose
exponent is a multiple of 3 (decimal) or of 10 bits (binary).
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, Decimal, localcontext
from functools import lru_cache

from ..bounded import INT64_MAX, MAX_INT_DIGITS, parse_int

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {v: k for k, v in _BINARY.items()}
_SYNTAX = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(.*)", re.ASCII)
_EXPONENT = re.compile(r"[eE]([+-]?\d+)", re.ASCII)


class QuantityError(ValueError):
    """Not a quantity Kubernetes accepts."""


#: ``maxAllowed``: ParseQuantity caps a larger value at the largest int64 ("a simple cap")
_MAX_ALLOWED = Decimal(INT64_MAX)


def _parse(text: str) -> tuple[Decimal, str]:
    """(value, format) with format ``binary``, ``decimal`` or ``exponent``; the value
    capped as ParseQuantity caps it, and no more digits converted than Python allows."""
    match = _SYNTAX.fullmatch(text.strip())
    if not match:
        raise QuantityError(f"quantity {text!r} does not match the Kubernetes syntax")
    if len(match.group(1)) > MAX_INT_DIGITS:
        raise QuantityError(f"quantity has more than {MAX_INT_DIGITS} digits")
    number, suffix = Decimal(match.group(1)), match.group(2)
    with localcontext() as ctx:  # exponents as wide as Go's int32 scale
        ctx.Emax, ctx.Emin, ctx.prec = MAX_EMAX, MIN_EMIN, MAX_INT_DIGITS + 40
        if suffix in _BINARY:
            value, fmt = number * (Decimal(2) ** _BINARY[suffix]), "binary"
        elif suffix in _DECIMAL:
            value, fmt = number.scaleb(_DECIMAL[suffix]), "decimal"
        elif exponent := _EXPONENT.fullmatch(suffix):
            # strconv.ParseInt(.., 10, 64), then int32(): out of range is no quantity
            scale = parse_int(exponent.group(1), low=-(2**31), high=2**31 - 1)
            if scale is None:
                raise QuantityError("quantity has an exponent beyond Go's int32 range")
            value, fmt = number.scaleb(scale), "exponent"
        else:
            raise QuantityError(f"quantity {text!r} has an unknown suffix {suffix!r}")
        return min(max(value, -_MAX_ALLOWED), _MAX_ALLOWED), fmt


def value_of(text: str) -> Decimal:
    """The number a quantity stands for (``2000m`` is 2, ``1Ki`` 1024); raises
    :class:`QuantityError` for what Kubernetes does not accept."""
    return _parse(text)[0]


def _round_up_to_nano(value: Decimal) -> Decimal:
    # Quantities carry at most nano precision; Go rounds finer values up (away from 0).
    with localcontext() as ctx:
        ctx.prec = 80
        return (
            value.quantize(Decimal("1e-9"), rounding=ROUND_CEILING)
            if value >= 0
            else -((-value).quantize(Decimal("1e-9"), rounding=ROUND_CEILING))
        )


def _decimal_form(value: Decimal, fmt: str) -> str:
    if value == 0:
        return "0"
    with localcontext() as ctx:
        ctx.prec = 80
        sign, digits, exp = value.normalize().as_tuple()
        assert isinstance(exp, int)
        mantissa = int("".join(map(str, digits)))
        # smallest exponent multiple of 3 not above the normalized one keeps the mantissa whole
        exp3 = exp - (exp % 3)
        mantissa *= 10 ** (exp - exp3)
        text = ("-" if sign else "") + str(mantissa)
        if fmt == "exponent":
            return text if exp3 == 0 else f"{text}e{exp3}"
        if exp3 > 18:  # beyond the largest suffix: Go keeps the digits
            return text + "0" * (exp3 - 18) + "E"
        return text + _DECIMAL_SUFFIX[exp3]


def _binary_form(value: Decimal) -> str:
    number = int(value)
    shift = 0
    while shift < 60 and number != 0 and number % 1024 == 0:
        number //= 1024
        shift += 10
    return str(number) + _BINARY_SUFFIX.get(shift, "")


_PARTS = re.compile(r"[+-]?(\d*)(?:\.(\d*))?(.*)", re.ASCII)
_MAX_DIGITS = 18  # an int64 mantissa: Go's fast path


def _kept_as_written(text: str) -> bool:
    """Go's ``ParseQuantity`` keeps the input string when it is already canonical by its
    fast-path test (so ``+5`` and ``1E3`` marshal as written)."""
    if text == "0":
        return True
    parts = _PARTS.fullmatch(text)
    if not parts:
        return False
    num, denom, suffix = parts.group(1), parts.group(2) or "", parts.group(3)
    shifted = num + denom
    if not shifted or not shifted.isdigit():
        return False
    if suffix in _BINARY:
        exponent = _BINARY[suffix]
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        return not denom and precision >= 0 and int(shifted) & 0x07 != 0
    if suffix in _DECIMAL:
        exponent = _DECIMAL[suffix]
    elif match := _EXPONENT.fullmatch(suffix):
        exponent = int(match.group(1))
    else:
        return False
    scale = exponent - len(denom)
    return (
        len(shifted) <= _MAX_DIGITS
        and scale >= -9
        and scale % 3 == 0
        and not shifted.endswith("000")
        and shifted[0] != "0"
    )


@lru_cache(maxsize=4096)  # pure; a render meets a handful of quantities, many times
def canonical(text: str) -> str:
    """``text`` as ``resource.Quantity`` marshals it after parsing."""
    text = text.strip()
    value, fmt = _parse(text)
    if _kept_as_written(text):
        return text
    value = _round_up_to_nano(value)
    if fmt == "binary":
        if -1024 < value < 1024 or value != value.to_integral_value():
            return _decimal_form(value, "decimal")
        return _binary_form(value)
    return _decimal_form(value, fmt)
