"""Go's own parsers for the setting values the operator reads with them: ``time.ParseDuration``
and ``Duration.String`` (a ``metav1.Duration``), and ``net/url.Parse``.

Ported from the Go standard library (``time/format.go``, ``net/url/url.go``), with the same
grammar, range and refusals, so that a setting the operator (or the API server, through a
``metav1.Duration`` field) would refuse is refused here, and the value rendered is spelled as
the operator's Go code writes it. A refusal says why in words of its own; it never echoes the
value (a URL may carry a password).
"""

from __future__ import annotations

import re
from typing import Final

# ---------------------------------------------------------------------------- time.Duration
#: the largest magnitude a Go ``time.Duration`` (int64 nanoseconds) holds: 1<<63 - 1
MAX_DURATION_NS: Final = 2**63 - 1
_OVER: Final = 2**63
_UNITS: Final[dict[str, int]] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # U+00B5 micro sign
    "\u03bcs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def _leading_int(s: str) -> tuple[int, str]:
    """``leadingInt``: the leading digits as a number within 1<<63; ValueError beyond."""
    x, i = 0, 0
    while i < len(s) and "0" <= s[i] <= "9":
        if x > _OVER // 10:
            raise ValueError("out of range")
        x = x * 10 + ord(s[i]) - 48
        if x > _OVER:
            raise ValueError("out of range")
        i += 1
    return x, s[i:]


def _leading_fraction(s: str) -> tuple[int, float, str]:
    """``leadingFraction``: the digits after a '.', their scale; precision stops at
    overflow (no error), as Go's does."""
    x, scale, i, overflow = 0, 1.0, 0, False
    while i < len(s) and "0" <= s[i] <= "9":
        if not overflow:
            y = x * 10 + ord(s[i]) - 48
            if x > MAX_DURATION_NS // 10 or y > _OVER:
                overflow = True
            else:
                x, scale = y, scale * 10
        i += 1
    return x, scale, s[i:]


def _component(s: str) -> tuple[int, str]:
    """One ``[0-9]*(\\.[0-9]*)?unit`` of a duration: its nanoseconds and what is left."""
    if not (s[0] == "." or "0" <= s[0] <= "9"):
        raise ValueError("invalid duration")
    before = len(s)
    v, s = _leading_int(s)
    pre = len(s) != before
    f, scale, post = 0, 1.0, False
    if s.startswith("."):
        before = len(s) - 1
        f, scale, s = _leading_fraction(s[1:])
        post = len(s) != before
    if not pre and not post:
        raise ValueError("invalid duration")
    i = 0
    while i < len(s) and not (s[i] == "." or "0" <= s[i] <= "9"):
        i += 1
    if i == 0:
        raise ValueError("missing unit in duration")
    unit = _UNITS.get(s[:i])
    if unit is None:
        raise ValueError(f"unknown unit {s[:i]!r} in duration")
    if v > _OVER // unit:
        raise ValueError("out of range")
    v *= unit
    if f > 0:  # float64, as Go computes it (nanosecond-exact for fractions of an hour)
        v += int(float(f) * (float(unit) / scale))
        if v > _OVER:
            raise ValueError("out of range")
    return v, s[i:]


def parse_duration(text: str) -> int:
    """``time.ParseDuration``: nanoseconds; ValueError (Go's reason) when Go refuses it."""
    s, neg = text, False
    if s[:1] in ("-", "+"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError("invalid duration")
    total = 0
    while s:
        v, s = _component(s)
        total += v
        if total > _OVER:
            raise ValueError("out of range")
    if neg:
        return -total
    if total > MAX_DURATION_NS:
        raise ValueError("out of range")
    return total


def _fraction(value: int, digits: int) -> str:
    """``fmtFrac`` and ``fmtInt``: ``value / 10**digits`` without trailing zeros."""
    whole, frac = divmod(value, 10**digits)
    tail = f"{frac:0{digits}d}".rstrip("0")
    return f"{whole}.{tail}" if tail else str(whole)


def format_duration(ns: int) -> str:
    """``Duration.String``: ``15m0s``, ``1h30m0s``, ``1.5s``, ``300ms``, ``0s``."""
    u = abs(ns)
    if u == 0:
        return "0s"
    if u < 1_000:
        text = f"{u}ns"
    elif u < 1_000_000:
        text = _fraction(u, 3) + "\u00b5s"
    elif u < 1_000_000_000:
        text = _fraction(u, 6) + "ms"
    else:
        text = _fraction(u % 60_000_000_000, 9) + "s"
        minutes = u // 60_000_000_000
        if minutes:
            text = f"{minutes % 60}m{text}"
            if minutes >= 60:
                text = f"{minutes // 60}h{text}"
    return "-" + text if ns < 0 else text


# ---------------------------------------------------------------------------- net/url.Parse
_CTL = re.compile(r"[\x00-\x1f\x7f]")
_HEX = frozenset("0123456789abcdefABCDEF")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
#: ASCII a host may hold unescaped (``shouldEscape`` in host mode, :port and [ipv6] included)
_HOST_ASCII = _ALNUM | frozenset("!$&'()*+,;=:[]<>\"-_.~")
_USERINFO = _ALNUM | frozenset("-._:~!$&'()*+,;=%@")
_SCHEME_REST = _ALNUM | frozenset("+-.")


def _unescape(s: str, mode: str = "") -> str | None:
    """``unescape``'s refusals: a malformed ``%`` escape; in a ``host``, an escaped ASCII
    byte (but ``%25``); in an IPv6 ``zone``, an escape of what a host could not hold; in
    both, a character a host cannot hold."""
    i = 0
    while i < len(s):
        if s[i] == "%":
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                return "invalid URL escape"
            escaped = s[i : i + 3]
            if mode == "host" and int(s[i + 1], 16) < 8 and escaped != "%25":
                return "invalid URL escape in host"
            v = chr(int(s[i + 1 : i + 3], 16))
            if mode == "zone" and escaped != "%25" and v != " " and v not in _HOST_ASCII:
                return "invalid URL escape in host"
            i += 3
            continue
        if mode and s[i] < "\x80" and s[i] not in _HOST_ASCII:
            return "invalid character in host name"
        i += 1
    return None


def _port_ok(colon_port: str) -> bool:
    """``validOptionalPort``: nothing, or ':' and digits."""
    if not colon_port:
        return True
    return colon_port[0] == ":" and all("0" <= c <= "9" for c in colon_port[1:])


def _unescaped(s: str) -> str:
    """``s`` with its (well-formed) ``%`` escapes decoded, as Go's bytes."""
    if "%" not in s:
        return s
    out, i = bytearray(), 0
    while i < len(s):
        if s[i] == "%":
            out.append(int(s[i + 1 : i + 3], 16))
            i += 3
        else:
            out += s[i].encode("utf-8", "surrogatepass")
            i += 1
    return out.decode("utf-8", "surrogateescape")


def _ip_literal_problem(host: str) -> str | None:
    """A host that starts with '[': an IPv6 address (its zone after ``%25``), then an
    optional port (Go 1.26: only a valid IPv6 address may be in brackets)."""
    end = host.rfind("]")
    if end < 0:
        return "missing ']' in host"
    if not _port_ok(host[end + 1 :]):
        return "invalid port after host"
    name = host[1:end]
    at = name.find("%25")
    parts = [(name, "host")] if at < 0 else [(name[:at], "host"), (name[at:], "zone")]
    for part, mode in parts:
        why = _unescape(part, mode)
        if why is not None:
            return why
    import ipaddress  # only for an IP literal, which is rare

    address, percent, zone = "".join(_unescaped(p) for p, _ in parts).partition("%")
    try:  # netip.ParseAddr: the zone is all after the first '%', not empty
        ipaddress.IPv6Address(address)
    except ValueError:
        return "invalid host: not an IPv6 address"
    return "invalid host: empty zone" if percent and not zone else None


def _host_problem(scheme: str, host: str) -> str | None:
    """``parseHost``: an IP literal in brackets, or a name and an optional port of digits
    (for http and https the port starts at the first ':', for other schemes the last)."""
    bracket = host.rfind("[")
    if bracket > 0:
        return "invalid IP-literal"
    if bracket == 0:
        return _ip_literal_problem(host)
    colon = host.find(":")
    if colon >= 0:
        if scheme not in ("http", "https"):
            colon = host.rfind(":")
        if not _port_ok(host[colon:]):
            return "invalid port after host"
    return _unescape(host, "host")


def _authority_problem(scheme: str, authority: str) -> str | None:
    """``parseAuthority``: the host after the last '@', the user information before it."""
    at = authority.rfind("@")
    why = _host_problem(scheme, authority[at + 1 :])
    if why is not None or at < 0:
        return why
    userinfo = authority[:at]
    if any(c not in _USERINFO for c in userinfo):
        return "invalid userinfo"
    name, _, password = userinfo.partition(":")
    return _unescape(name) or _unescape(password)


def _scheme(raw: str) -> tuple[str, str]:
    """``getScheme``: (scheme, rest); ValueError for a URL that starts with ':'."""
    for i, c in enumerate(raw):
        if c == ":":
            if i == 0:
                raise ValueError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        if c in _ALNUM and (i > 0 or not c.isdigit()):
            continue
        if c in _SCHEME_REST and i > 0:
            continue
        break
    return "", raw


def url_problem(raw: str) -> str | None:
    """Why Go's ``url.Parse`` refuses ``raw`` (None: it parses), without echoing it."""
    text, _, fragment = raw.partition("#")
    if _CTL.search(text):
        return "invalid control character in URL"
    if text == "*":
        return _unescape(fragment)
    try:
        scheme, rest = _scheme(text)
    except ValueError as exc:
        return str(exc)
    # the query is cut off (a lone '?' at the end: an empty query), never checked
    rest = rest[:-1] if rest.endswith("?") and rest.count("?") == 1 else rest.partition("?")[0]
    if not rest.startswith("/"):
        if scheme:  # opaque
            return _unescape(fragment)
        if ":" in rest.partition("/")[0]:
            return "first path segment in URL cannot contain colon"
    why = None
    if (scheme or not rest.startswith("///")) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        why = _authority_problem(scheme.lower(), authority)
        rest = slash + path
    return why or _unescape(rest) or _unescape(fragment)
