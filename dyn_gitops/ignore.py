"""What a directory read leaves out: the ignore file, ``--exclude``, and the files GitOps
repositories keep beside their manifests.

Patterns are gitignore's (``*``, ``?``, ``[...]``, ``**``, a leading ``/`` anchors, a trailing
``/`` matches directories only, ``!`` re-includes, the last match wins; a file inside an
excluded directory stays excluded). The ignore file comes from Git, so it is hostile: its
size, its number of patterns and their length are bounded, and matching is a dynamic
program (time linear in the pattern times the name), never a backtracking regular
expression that a pattern such as ``*a*a*a*a*a*b`` could keep busy for minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
U = TypeVar("U")

#: the ignore file, at the root of what is read (a directory, or a directory of a revision)
IGNORE_FILE = ".dyn-gitops-ignore"

#: files a GitOps repository keeps beside its manifests, by name: skipped unless they hold a
#: Kubernetes object (``parse.holds_object``)
BESIDE_NAMES = {
    "kustomization.yaml": "a kustomization file",
    "kustomization.yml": "a kustomization file",
    "Chart.yaml": "a Helm chart's Chart.yaml",
    "values.schema.json": "a Helm chart's values schema",
}
#: a chart's directories (beside its Chart.yaml) whose files are Helm's, not manifests
CHART_DIRS = ("templates", "charts")


def beside_reason(name: str) -> str:
    """Why a file named ``name`` may be no manifest ("" if its name says nothing)."""
    if name in BESIDE_NAMES:
        return BESIDE_NAMES[name]
    stem, dot, ext = name.rpartition(".")
    if dot and ext in ("yaml", "yml") and stem.startswith("values"):
        return "a Helm values file"
    return ""


# ---------------------------------------------------------------------------- patterns
@dataclass(frozen=True)
class _Pattern:
    segments: tuple[str, ...]  # "**" is any number of directories
    negated: bool
    dir_only: bool
    where: str  # ".dyn-gitops-ignore:3" or "--exclude"


@dataclass(frozen=True)
class Ignore:
    """Compiled patterns; :meth:`excluded` says whether a path (relative to the root) is."""

    patterns: tuple[_Pattern, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def excluded(self, rel: str, *, is_dir: bool) -> str:
        """Where the pattern that excludes ``rel`` was written ("" if none does): the last
        pattern that matches decides (a directory's parents are checked by the walk, which
        never enters an excluded directory)."""
        parts = tuple(rel.split("/"))
        for p in reversed(self.patterns):
            if (is_dir or not p.dir_only) and _match(p.segments, parts):
                return "" if p.negated else p.where
        return ""


class ExcludeError(ValueError):
    """An ``--exclude`` pattern (or too many) refused: a usage error."""


def compile_patterns(
    lines: Iterable[tuple[str, str]], *, max_patterns: int, max_chars: int
) -> tuple[Ignore, list[tuple[str, str]]]:
    """``(where, line)`` pairs (``.dyn-gitops-ignore:3``, ``--exclude``) compiled, and the
    problems as ``(where, message)``: blank lines and ``#`` comments are skipped; at most
    ``max_patterns`` patterns of at most ``max_chars`` characters (settings.py's bounds)."""
    patterns: list[_Pattern] = []
    problems: list[tuple[str, str]] = []
    for where, line in lines:
        text = _strip(line)
        if not text or text.startswith("#"):
            continue
        if len(patterns) >= max_patterns:
            problems.append((where, f"more than {max_patterns} ignore patterns; refused"))
            break
        if len(text) > max_chars:
            message = (
                f"an ignore pattern of {len(text)} characters, over the limit of "
                f"{max_chars}; refused"
            )
            problems.append((where, message))
            continue
        patterns.append(_pattern(text, where))
    return Ignore(tuple(patterns)), problems


def ignore_file_lines(text: str) -> list[tuple[str, str]]:
    return [(f"{IGNORE_FILE}:{n}", line) for n, line in enumerate(text.splitlines(), 1)]


def _strip(line: str) -> str:
    """Trailing spaces go unless escaped with a backslash (as Git reads them)."""
    line = line.rstrip("\r\n")
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "
    return stripped


def _pattern(text: str, where: str) -> _Pattern:
    negated = text.startswith("!")
    body = text[1:] if negated else text
    if body.startswith(("\\!", "\\#")):
        body = body[1:]
    dir_only = body.endswith("/")
    body = body.rstrip("/")
    anchored = "/" in body
    segments = tuple(s for s in body.lstrip("/").split("/") if s)
    if not anchored:
        segments = ("**", *segments)
    elif segments and segments[-1] == "**":  # "dir/**": everything inside, not dir itself
        segments = (*segments[:-1], "*", "**")
    return _Pattern(segments, negated, dir_only, where)


# ---------------------------------------------------------------------------- matching
def _match(pattern: Sequence[str], parts: Sequence[str]) -> bool:
    """Segments against path components; ``**`` matches zero or more components."""
    return _wildcard(pattern, parts, lambda seg: seg == "**", _glob)


def _glob(pattern: str, name: str) -> bool:
    """One segment: ``*`` (not ``/``), ``?``, ``[...]`` (``!``/``^`` negates, ranges) and
    ``\\`` escapes, by dynamic programming over the name."""
    return _wildcard(_tokens(pattern), name, lambda token: token.kind == "*", _one)


def _wildcard(
    pattern: Sequence[T],
    items: Sequence[U],
    is_star: Callable[[T], bool],
    one: Callable[[T, U], bool],
) -> bool:
    """Dynamic programming over ``items``, in time ``len(pattern) * len(items)`` (no
    backtracking a pattern bomb could exploit): a star matches zero or more items, any
    other element exactly one item it accepts. ``reach[j]``: the pattern so far can match
    the first ``j`` items."""
    reach = [True] + [False] * len(items)
    for element in pattern:
        if is_star(element):
            seen = False
            for j in range(len(reach)):
                seen = seen or reach[j]
                reach[j] = seen
            continue
        nxt = [False] * len(reach)
        for j, item in enumerate(items):
            if reach[j] and one(element, item):
                nxt[j + 1] = True
        reach = nxt
        if not any(reach):
            return False
    return reach[-1]


@dataclass(frozen=True)
class _Token:
    kind: str  # "*", "?", "lit" (one character) or "[" (a set)
    char: str = ""
    negate: bool = False
    ranges: tuple[tuple[str, str], ...] = ()


def _one(token: _Token, ch: str) -> bool:
    if token.kind == "?":
        return True
    if token.kind == "lit":
        return ch == token.char
    inside = any(lo <= ch <= hi for lo, hi in token.ranges)
    return inside != token.negate


def _tokens(pattern: str) -> list[_Token]:
    out: list[_Token] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            if not out or out[-1].kind != "*":
                out.append(_Token("*"))
            i += 1
        elif ch == "?":
            out.append(_Token("?"))
            i += 1
        elif ch == "[" and (parsed := _bracket(pattern, i)) is not None:
            token, i = parsed
            out.append(token)
        else:
            if ch == "\\" and i + 1 < len(pattern):
                i += 1
            out.append(_Token("lit", pattern[i]))
            i += 1
    return out


def _bracket(pattern: str, start: int) -> tuple[_Token, int] | None:
    """``[...]`` at ``start``: the token and the index after it, or None (a literal ``[``)."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    i += negate
    ranges: list[tuple[str, str]] = []
    first = True
    while i < len(pattern):
        ch = pattern[i]
        if ch == "]" and not first:
            return _Token("[", negate=negate, ranges=tuple(ranges)), i + 1
        if ch == "\\" and i + 1 < len(pattern):
            i += 1
            ch = pattern[i]
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            ranges.append((ch, pattern[i + 2]))
            i += 3
        else:
            ranges.append((ch, ch))
            i += 1
        first = False
    return None


__all__ = [
    "BESIDE_NAMES",
    "CHART_DIRS",
    "IGNORE_FILE",
    "ExcludeError",
    "Ignore",
    "beside_reason",
    "compile_patterns",
    "ignore_file_lines",
]
