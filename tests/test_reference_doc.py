"""docs/reference-behaviour.md agrees with the code and the tests (issue 28, point 3).

The document reads as one release (Dynamo 1.5.1): what is rendered, then the deliberate
differences from the operator, each pinned by a test named as a pytest node id. These
checks keep it honest: every node id it names exists, every deliberate difference names
one, every ``dyn_gitops/...`` path and name it cites exists, the headings other files cite
exist, and statements once true of older code and now false do not come back.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC_PATH = ROOT / "docs" / "reference-behaviour.md"
DOC = DOC_PATH.read_text(encoding="utf-8")

RENDERED = "## What 1.5.1 does (rendered)"
DIFFERENCES = "## Deliberate differences from the operator"

#: ``tests/test_x.py::test_name`` (or ``::Class::test_name``), with an optional ``[id]``
NODE_ID = re.compile(r"(tests/test_\w+\.py)::((?:Test\w+::)?test_\w+)(\[[^\]\s`]+\])?")
#: a backticked repository path, optionally followed by a backticked name defined in it
CODE_REF = re.compile(
    r"`((?:dyn_gitops|operator/dyn_gitops_operator|tools|samples|bench)/[\w./-]*)`"
    r"(?:\s+`([A-Za-z_][\w.]*)`)?"
)

#: statements of older code that the code contradicts today: pattern -> why it is false
KNOWN_FALSE = {
    r"(?is)EPP[^.]{0,80}not yet rendered": "the native Rust EPP is rendered (expand/epp.py)",
    r"(?i)one volcano podgroup": "one natively scaled LeaderWorkerSet per service, no PodGroup",
    r"<dcd>-<i>": "the LeaderWorkerSet is <dcd>-0, one per service",
    r"(?i)not\W{0,3}byte-identical": "the worker hash v2 is byte-identical to the operator's",
    r"(?i)v1alpha1 era|1\.1-era|1\.1 line|1\.1-line|1\.1 webhook": "no older-operator prose",
    r"top-level `resources` beat": "mainContainer.resources win key by key (1.5 conversion)",
    r"(?i)our own\W{0,3}script": "the wait-leader ConfigMap holds the operator's script",
}


def _node_ids(text: str) -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(2), m.group(3) or "") for m in NODE_ID.finditer(text)]


def _section(heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same level."""
    level = heading.split(" ", 1)[0]
    start = DOC.index(heading + "\n") + len(heading)
    end = re.search(rf"^{level} ", DOC[start:], re.MULTILINE)
    return DOC[start : start + end.start()] if end else DOC[start:]


@cache
def _tests_of(path: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Test functions of a module: ``name`` or ``Class::name``."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[f"{node.name}::{item.name}"] = item
    return found


def _param_ids(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str] | None:
    """The explicit ids of ``fn``'s parametrization (``pytest.param(..., id=...)`` and
    ``ids=[...]``), or None when it is not parametrized by a decorator."""
    calls = [d for d in fn.decorator_list if isinstance(d, ast.Call)]
    marks = [c for c in calls if "parametrize" in ast.unparse(c.func)]
    if not marks:
        return None
    ids: set[str] = set()
    for mark in marks:
        for node in ast.walk(mark):
            if isinstance(node, ast.keyword) and node.arg in ("id", "ids"):
                for const in ast.walk(node.value):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        ids.add(const.value)
    return ids


def _defines(path: Path, dotted: str) -> bool:
    """``dotted`` (``name`` or ``Class.member``) is defined at the top of module ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    head, _, member = dotted.partition(".")
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        if head not in names:
            continue
        if not member:
            return True
        if isinstance(node, ast.ClassDef):
            return any(
                getattr(item, "name", None) == member
                or (isinstance(item, ast.AnnAssign) and ast.unparse(item.target) == member)
                for item in node.body
            )
    return False


def test_the_document_reads_as_one_release() -> None:
    """First what 1.5.1 renders, then the deliberate differences, and nothing after them."""
    headings = re.findall(r"^## .*$", DOC, re.MULTILINE)
    assert headings == [RENDERED, DIFFERENCES], headings


def test_every_named_test_exists() -> None:
    """Each node id the document names is a test function of that file (and a bracketed id
    one of its explicit parametrization ids)."""
    named = _node_ids(DOC)
    assert len(named) > 40, "the document names its tests as pytest node ids"
    missing = []
    for path, name, bracket in named:
        tests = _tests_of(path) if (ROOT / path).is_file() else {}
        fn = tests.get(name)
        if fn is None:
            missing.append(f"{path}::{name}")
            continue
        if bracket:
            ids = _param_ids(fn)
            if ids is None or (ids and bracket[1:-1] not in ids):
                missing.append(f"{path}::{name}{bracket}")
    assert missing == [], "tests the document names that do not exist"


def test_every_deliberate_difference_names_a_test() -> None:
    entries = re.split(r"^- ", _section(DIFFERENCES), flags=re.MULTILINE)[1:]
    assert len(entries) >= 10
    untested = [e.split("\n", 1)[0] for e in entries if not _node_ids(e)]
    assert untested == [], "deliberate differences without the test that pins them"


def test_every_code_path_and_name_exists() -> None:
    """Every backticked repository path exists; a name written right after a module path
    (`dyn_gitops/rules.py` `warn_graph`) is defined in that module."""
    refs = [(m.group(1), m.group(2)) for m in CODE_REF.finditer(DOC)]
    assert len(refs) > 30
    wrong = []
    for path, name in refs:
        target = ROOT / path
        if not target.exists():
            wrong.append(path)
        elif name and not (target.suffix == ".py" and _defines(target, name)):
            wrong.append(f"{path} {name}")
    assert wrong == [], "paths or names the document cites that the code does not have"


@pytest.mark.parametrize("pattern", sorted(KNOWN_FALSE))
def test_no_statement_the_code_contradicts(pattern: str) -> None:
    found = re.search(pattern, DOC)
    assert found is None, f"{found.group(0)!r}: {KNOWN_FALSE[pattern]}" if found else ""


def _cited_sections() -> dict[str, str]:
    """Section names other files cite next to the document's name: ``reference-behaviour.md``
    followed by ``("Name")``, ``, "Name"`` or ``, *Name*`` (comment markers and line breaks
    ignored) -> the citing file."""
    cited: dict[str, str] = {}
    roots = [ROOT / d for d in ("dyn_gitops", "operator", "tests", "docs", "charts")]
    files = [p for r in roots for s in ("*.py", "*.md", "*.yaml") for p in r.rglob(s)]
    files += list(ROOT.glob("*.md"))
    for path in files:
        if path in (DOC_PATH, Path(__file__).resolve()) or ".venv" in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"reference-behaviour\.md", text):
            after = re.sub(r"#:?|`", " ", text[m.end() : m.end() + 120])
            after = re.sub(r"\s+", " ", after)
            quoted = re.match(r'\s*[),]?\s*[(,]\s*["*]([^"*]{3,60})["*]', after)
            if quoted:
                cited[quoted.group(1).strip()] = str(path.relative_to(ROOT))
    return cited


def test_the_headings_other_files_cite_exist() -> None:
    cited = _cited_sections()
    assert "The internal model" in cited and "GPU Memory Service and failover" in cited
    headings = [h.lstrip("#").strip() for h in re.findall(r"^#+ .*$", DOC, re.MULTILINE)]
    absent = {
        name: where
        for name, where in cited.items()
        if not any(h.startswith(name) for h in headings)
    }
    assert absent == {}, "sections other files cite that the document no longer has"
