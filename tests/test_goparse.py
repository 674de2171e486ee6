"""The ports of Go's ``time.ParseDuration``/``Duration.String`` and ``net/url.Parse``
(``dyn_gitops/goparse.py``) against Go's own test tables (``time/time_test.go``,
``net/url/url_test.go``, Go 1.26) and the cases the settings rely on."""

from __future__ import annotations

import pytest

from dyn_gitops.goparse import MAX_DURATION_NS, format_duration, parse_duration, url_problem

S, MS, US, MIN, H = 10**9, 10**6, 10**3, 60 * 10**9, 3600 * 10**9

#: parseDurationTests (time_test.go)
PARSED = [
    ("0", 0),
    ("5s", 5 * S),
    ("30s", 30 * S),
    ("1478s", 1478 * S),
    ("-5s", -5 * S),
    ("+5s", 5 * S),
    ("-0", 0),
    ("+0", 0),
    ("5.0s", 5 * S),
    ("5.6s", 5 * S + 600 * MS),
    ("5.s", 5 * S),
    (".5s", 500 * MS),
    ("1.0s", S),
    ("1.00s", S),
    ("1.004s", S + 4 * MS),
    ("1.0040s", S + 4 * MS),
    ("100.00100s", 100 * S + MS),
    ("10ns", 10),
    ("11us", 11 * US),
    ("12\u00b5s", 12 * US),
    ("12\u03bcs", 12 * US),
    ("13ms", 13 * MS),
    ("14s", 14 * S),
    ("15m", 15 * MIN),
    ("16h", 16 * H),
    ("3h30m", 3 * H + 30 * MIN),
    ("10.5s4m", 4 * MIN + 10 * S + 500 * MS),
    ("-2m3.4s", -(2 * MIN + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", H + 2 * MIN + 3 * S + 4 * MS + 5 * US + 6),
    ("39h9m14.425s", 39 * H + 9 * MIN + 14 * S + 425 * MS),
    ("52763797000ns", 52763797000),
    ("0.3333333333333333333h", 20 * MIN),
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036854775.807us", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -(1 << 63)),
    ("-9223372036854775.808us", -(1 << 63)),
    ("-9223372036s854ms775us808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("0.100000000000000000000h", 6 * MIN),
    ("0.830103483285477580700h", 49 * MIN + 48 * S + 372539827),
]

#: parseDurationErrorTests (time_test.go)
REFUSED = [
    "",
    "3",
    "-",
    "s",
    ".",
    "-.",
    ".s",
    "+.s",
    "1d",
    "\x85\x85",
    "\xffff",
    "hello \xffff world",
    "9223372036854775808ns",
    "9223372036854775.808us",
    "9223372036854ms775us808ns",
    "-9223372036854775809ns",
    "3000000h",  # the report: past ~292 years
]

#: durationTests (time_test.go): Duration.String
SPELLED = [
    ("0s", 0),
    ("1ns", 1),
    ("1.1\u00b5s", 1100),
    ("2.2ms", 2200 * US),
    ("3.3s", 3300 * MS),
    ("4m5s", 4 * MIN + 5 * S),
    ("4m5.001s", 4 * MIN + 5001 * MS),
    ("5h6m7.001s", 5 * H + 6 * MIN + 7001 * MS),
    ("8m0.000000001s", 8 * MIN + 1),
    ("2562047h47m16.854775807s", (1 << 63) - 1),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("15m0s", 15 * MIN),  # what the operator writes for its default
]


@pytest.mark.parametrize(("text", "ns"), PARSED)
def test_parse_duration_as_go(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", REFUSED)
def test_parse_duration_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("text", "ns"), SPELLED)
def test_format_duration_as_go(text: str, ns: int) -> None:
    assert format_duration(ns) == text
    assert parse_duration(text) == ns


def test_the_largest_duration() -> None:
    assert MAX_DURATION_NS == 2**63 - 1
    assert format_duration(MAX_DURATION_NS) == "2562047h47m16.854775807s"


#: what Go 1.26's url.Parse accepts (url_test.go's urltests and the operator's own uses)
URLS_OK = [
    "",
    "*",
    "http://www.google.com",
    "http://www.google.com/?q=go+language",
    "http://user:password@google.com:8080/path?q=1#frag",
    "http://john.doe@www.google.com/",
    "http://j@ne:password@google.com",  # '@' in the user information
    "mailto:webmaster@golang.org",
    "/foo?query=http://bad",
    "//foo",
    "//user@foo/path?a=b",
    "a:b/c",  # an opaque URL
    "http://[fe80::1%25en0]:8080/",
    "http://[fe80::1%25%41]/",  # a zone may escape what a host holds
    "http://[::ffff:1.2.3.4]/",
    "grpc://model-express:8001",
    "model-express",
    "postgres://h1:1,h2:2/db",  # other schemes: the port starts at the last ':'
    "http://h/%2f?%zz",  # the query is not read
]

URLS_REFUSED = [
    ("http://h\n/", "invalid control character in URL"),
    (":foo", "missing protocol scheme"),
    ("1a:foo", "first path segment in URL cannot contain colon"),
    ("http://host:port/", "invalid port after host"),
    ("http://localhost:1:2/", "invalid port after host"),  # Go 1.26: strict for http(s)
    ("http://[::1/", "missing ']' in host"),
    ("http://a[::1]/", "invalid IP-literal"),
    ("http://[1.2.3.4]/", "invalid host: not an IPv6 address"),
    ("http://[fe80::1%25]/", "invalid host: empty zone"),
    ("http://%41:8080/", "invalid URL escape in host"),
    ("http://a b.com/", "invalid character in host name"),
    ("http://us er@h/", "invalid userinfo"),
    ("http://h/%2", "invalid URL escape"),
    ("http://h/#%zz", "invalid URL escape"),
]


@pytest.mark.parametrize("url", URLS_OK)
def test_url_parse_accepts_what_go_accepts(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(("url", "why"), URLS_REFUSED)
def test_url_parse_refuses_what_go_refuses(url: str, why: str) -> None:
    assert url_problem(url) == why
