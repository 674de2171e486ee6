"""The Dynamo runtime version of a component, as the operator resolves it.

Since 1.5 the operator renders by the runtime version of a component's main image, not only by
its own version (upstream-1.5.md section 1.1 point 2). The version is a strict semantic version
read from the main container's image tag, or the component's ``runtimeVersionOverride``, which
wins. Only the MAJOR.MINOR.PATCH core counts: prerelease and build suffixes are dropped.
Digests without a tag, ``latest`` and custom tags do not resolve.

Behaviour ported from ``deploy/operator/internal/runtimeversion/runtimeversion.go`` @ 2a6da14c8
(#10494, #12421), which parses with Masterminds semver v3 ``StrictNewVersion``. The operator
version in the origin-version annotation is read as its compatibility gates read it
(:func:`parse_origin`, Masterminds ``NewVersion``). This module imports nothing of the
project but the bounded integer reader: settings, validation, the expansion and the worker
hash all read it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from .bounded import UINT64_MAX, parse_int

# a semantic version with an optional v/V prefix, as the operator matches an image tag
_NUMBER = r"(0|[1-9][0-9]*)"
_IDENT = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_IMAGE_TAG = re.compile(
    rf"[vV]?{_NUMBER}\.{_NUMBER}\.{_NUMBER}"
    rf"(?:-({_IDENT}(?:\.{_IDENT})*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)
_DIGITS: Final = frozenset("0123456789")
# Go's unicode.IsSpace (str.strip() would also drop U+001C..U+001F)
_GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" + (
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_IDENT_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789")


class RuntimeVersionError(ValueError):
    """A runtime version that does not resolve; the message is the operator's."""


@dataclass(frozen=True, order=True)
class Version:
    """A runtime compatibility version: the semver core, ordered as the operator compares."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @classmethod
    def of(cls, text: str) -> Version:
        """A version written in code, e.g. a gate's minimum: ``Version.of("1.5.0")``."""
        return parse(text)


def parse(value: str) -> Version:
    """The version an explicit ``runtimeVersionOverride`` declares (strict semver, no prefix)."""
    version = _strict(value)
    if version is None:
        raise RuntimeVersionError('must be a semantic version such as "1.1.0"')
    return version


@lru_cache(maxsize=1024)  # pure; every component of every graph asks (errors: not kept)
def parse_image_version(image: str) -> Version:
    """The version in an image reference's tag (``repo:v1.5.0-cuda13`` is 1.5.0)."""
    tag = image_tag(image)
    if not tag:
        raise RuntimeVersionError(f"image {_quote(image)} does not contain a tag")
    trimmed = tag.strip(_GO_SPACE)
    version = None
    if _IMAGE_TAG.fullmatch(trimmed):
        version = _strict(trimmed.removeprefix("v").removeprefix("V"))
    if version is None:
        raise RuntimeVersionError(
            f'image tag {_quote(tag)} must contain a semantic version such as "1.1.0"'
        )
    return version


def resolve(image: str, override: str | None = None) -> Version:
    """The runtime version of a component: its override when set (an invalid override does not
    fall back to the image), else its main image's tag. Raises :class:`RuntimeVersionError`."""
    if override:
        return parse(override)
    return parse_image_version(image)


def image_tag(image: str) -> str:
    """The tag of an image reference, ``""`` when it has none (a digest is not a tag)."""
    ref = image.strip(_GO_SPACE).partition("@")[0]
    last_colon = ref.rfind(":")
    if last_colon <= ref.rfind("/"):
        return ""
    return ref[last_colon + 1 :]


@dataclass(frozen=True)
class OriginVersion:
    """An operator version as the origin-version annotation holds it: the core and its
    prerelease (a prerelease comes before its release, ``1.0.0-rc.1`` < ``1.0.0``)."""

    core: Version
    prerelease: str = ""

    def at_least(self, minimum: Version) -> bool:
        """At or above a release version (``compatibility.Gate.Enabled``)."""
        return self.core > minimum or (self.core == minimum and not self.prerelease)


# Masterminds' loose form, which NewVersion coerces (``1``, ``1.2``, ``v1.2.3``, ``01.2.3``)
_LOOSE = re.compile(
    r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)


def parse_origin(value: str) -> OriginVersion | None:
    """An origin version as the operator reads it (Masterminds semver v3.4.0 ``NewVersion``,
    which coerces): what its validating webhook accepts as "valid semver"; None otherwise."""
    m = _LOOSE.fullmatch(value)
    if m is None:
        return None
    # strconv.ParseUint: leading zeros allowed, beyond uint64 an error (not converted)
    major, minor, patch = (_uint64((g or "0").lstrip(".")) for g in m.group(1, 2, 3))
    if major is None or minor is None or patch is None:
        return None
    prerelease, metadata = m.group(4) or "", m.group(5)
    if prerelease and not _identifiers_ok(prerelease, numeric_rule=True):
        return None
    if metadata is not None and not _identifiers_ok(metadata, numeric_rule=False):
        return None
    return OriginVersion(Version(major, minor, patch), prerelease)


@lru_cache(maxsize=1024)  # pure
def _strict(value: str) -> Version | None:
    """Masterminds semver's ``StrictNewVersion``, reduced to its core (None: not a version)."""
    parts = value.split(".", 2)
    if len(parts) != 3:
        return None
    core, plus, metadata = parts[2].partition("+")
    if plus and not _identifiers_ok(metadata, numeric_rule=False):
        return None
    core, dash, prerelease = core.partition("-")
    if dash and not _identifiers_ok(prerelease, numeric_rule=True):
        return None
    numbers = (parts[0], parts[1], core)
    if any(not n or not set(n) <= _DIGITS or (len(n) > 1 and n[0] == "0") for n in numbers):
        return None
    major, minor, patch = (_uint64(n) for n in numbers)
    if major is None or minor is None or patch is None:
        return None
    return Version(major, minor, patch)


def _uint64(digits: str) -> int | None:
    """Go's ``strconv.ParseUint(digits, 10, 64)``, told without converting thousands of
    digits (Python refuses more than 4,300)."""
    return parse_int(digits, low=0, high=UINT64_MAX)


def _identifiers_ok(text: str, *, numeric_rule: bool) -> bool:
    """Dot-separated, non-empty ``[0-9A-Za-z-]`` identifiers; a prerelease's numeric
    identifiers have no leading zero."""
    for ident in text.split("."):
        if not ident or not set(ident) <= _IDENT_CHARS:
            return False
        if numeric_rule and set(ident) <= _DIGITS and len(ident) > 1 and ident[0] == "0":
            return False
    return True


#: the longest image or tag a message quotes whole (a longer one is cut: one short line)
_QUOTED_MAX: Final = 80


def _quote(text: str) -> str:
    """Go's ``%q`` for the printable strings an image reference holds, cut when long."""
    if len(text) > _QUOTED_MAX:
        return json.dumps(text[: _QUOTED_MAX - 4], ensure_ascii=False)[:-1] + '..."'
    return json.dumps(text, ensure_ascii=False)
