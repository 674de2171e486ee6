"""The runtime version the 1.5 operator renders by.

Source: ``deploy/operator/internal/runtimeversion/runtimeversion.go`` and its
``runtimeversion_test.go`` @ 2a6da14c8 (#10494, #12421), parsing with Masterminds semver
v3.4.0 ``StrictNewVersion``.
"""

from __future__ import annotations

import re

import pytest

from dyn_gitops.runtimeversion import (
    RuntimeVersionError,
    Version,
    image_tag,
    parse,
    parse_image_version,
    resolve,
)

REFERENCE = Version(1, 4, 1)


@pytest.mark.parametrize(
    ("version", "want"),
    [
        (Version(0, 9, 9), -1),
        (Version(1, 3, 9), -1),
        (Version(1, 4, 0), -1),
        (Version(1, 4, 1), 0),
        (Version(1, 4, 2), 1),
        (Version(1, 5, 0), 1),
        (Version(2, 0, 0), 1),
    ],
)
def test_versions_compare_by_their_core(version: Version, want: int) -> None:
    """TestVersionCompare: major, then minor, then patch."""
    got = (version > REFERENCE) - (version < REFERENCE)
    assert got == want


def test_str_is_gos_version_string() -> None:
    """``Version.String()`` is ``%d.%d.%d``: no prefix, no suffix (the worker hash hashes it)."""
    assert str(parse_image_version("nvcr.io/nvidia/ai-dynamo/vllm-runtime:v1.5.1-cuda13+b.7")) == (
        "1.5.1"
    )
    assert str(Version(10, 0, 12)) == "10.0.12"
    assert Version.of("1.5.0") == Version(1, 5, 0)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("1.2.3", Version(1, 2, 3)),
        ("0.0.0", Version(0, 0, 0)),
        ("1.5.0-rc.1+build.5", Version(1, 5, 0)),
        ("18446744073709551615.0.0", Version(2**64 - 1, 0, 0)),
    ],
)
def test_parse_override(value: str, want: Version) -> None:
    """TestParse: a canonical override parses."""
    assert parse(value) == want


@pytest.mark.parametrize(
    "value",
    [
        "1.2",  # incomplete
        "18446744073709551616.0.0",  # overflows uint64
        "v1.2.3",  # the strict parser takes no prefix (only image tags may carry one)
        "01.2.3",
        "1.2.3.4",
        "1.2.3-",
        "1.2.3+",
        "1.2.3-01",
        "1.2.3-a..b",
        "1.2.3-a_b",
        " 1.2.3",
        "",
        "latest",
    ],
)
def test_parse_rejects(value: str) -> None:
    """TestParse: no fallback, the operator's message."""
    with pytest.raises(
        RuntimeVersionError, match=re.escape('must be a semantic version such as "1.1.0"')
    ):
        parse(value)


@pytest.mark.parametrize(
    ("image", "want"),
    [
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:v1.2.3-cuda13", Version(1, 2, 3)),
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1", Version(1, 5, 1)),
        ("runtime:V1.0.0", Version(1, 0, 0)),
        ("localhost:5000/runtime:1.4.0", Version(1, 4, 0)),  # the port is not the tag
        ("nvcr.io/x/runtime:1.5.0@sha256:" + "a" * 64, Version(1, 5, 0)),  # tag + digest
        ("  runtime:1.5.0  ", Version(1, 5, 0)),
        ("runtime:1.3.0-0.3.7+exp.sha.5114f85", Version(1, 3, 0)),
    ],
)
def test_parse_image_version(image: str, want: Version) -> None:
    """TestParseImageVersion: a tag with a v prefix and suffixes parses to its core."""
    assert parse_image_version(image) == want


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ("registry.example/runtime:sha-123", 'image tag "sha-123" must contain a semantic'),
        ("nvcr.io/x/runtime:latest", 'image tag "latest" must contain'),
        ("nvcr.io/x/runtime:my-tag", 'image tag "my-tag" must contain'),
        ("nvcr.io/x/runtime:${VERSION}", 'image tag "${VERSION}" must contain'),
        ("nvcr.io/x/runtime:1.5", 'image tag "1.5" must contain'),
        ("nvcr.io/x/runtime:vv1.5.0", 'image tag "vv1.5.0" must contain'),
        ("nvcr.io/x/runtime@sha256:" + "a" * 64, "does not contain a tag"),
        ("localhost:5000/runtime", 'image "localhost:5000/runtime" does not contain a tag'),
        ("runtime", "does not contain a tag"),
        ("runtime:", "does not contain a tag"),
        ("", 'image "" does not contain a tag'),
    ],
)
def test_parse_image_version_rejects(image: str, message: str) -> None:
    """TestParseImageVersion: digests, ``latest`` and custom tags do not resolve."""
    with pytest.raises(RuntimeVersionError, match=re.escape(message)):
        parse_image_version(image)


def test_image_tag() -> None:
    """``imageTag``: the text after the last colon that follows the last slash, digest cut."""
    assert image_tag("a/b:c@sha256:x") == "c"
    assert image_tag("host:5000/b") == ""
    assert image_tag("b@sha256:abc") == ""


def test_resolve_override_wins() -> None:
    """TestResolve: the override is authoritative and an invalid one does not fall back."""
    assert resolve("nvcr.io/nvidia/ai-dynamo/runtime:v1.5.0-cuda13") == Version(1, 5, 0)
    assert resolve("nvcr.io/nvidia/ai-dynamo/runtime:v1.5.0-cuda13", "") == Version(1, 5, 0)
    assert resolve("nvcr.io/nvidia/ai-dynamo/runtime:1.5.0", "1.4.0") == Version(1, 4, 0)
    assert resolve("nvcr.io/x/runtime:latest", "1.5.1") == Version(1, 5, 1)
    with pytest.raises(RuntimeVersionError):
        resolve("nvcr.io/nvidia/ai-dynamo/runtime:1.5.0", "invalid")
