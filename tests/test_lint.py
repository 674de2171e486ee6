"""The code stays ruff- and mypy-clean (the project's typing and style contract); the tests
share their helpers through tests/support only; pytest is strict; the test tools are pinned."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from support.paths import REPO

LINTED = ["dyn_gitops", "operator", "bench", "tests", "tools", ".github"]


def test_ruff_is_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *LINTED, "--output-format", "concise"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_code_is_ruff_formatted() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *LINTED],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_is_clean_on_both_sides() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_render_side_never_imports_the_kubernetes_client() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "dyn_gitops").rglob("*.py")
        if any(
            line.strip().startswith(("import kubernetes", "from kubernetes"))
            for line in p.read_text().splitlines()
        )
    ]
    assert offenders == []


# ------------------------------------------------------------------------- the test support
TESTS = REPO / "tests"


def _python_files() -> list[Path]:
    return sorted([*TESTS.rglob("*.py"), *(REPO / "bench").rglob("*.py")])


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
    return out


def test_no_module_imports_a_test_module_or_conftest() -> None:
    """Shared helpers live in tests/support; a test module (or conftest, or support, or a
    bench) importing another test module or conftest runs its module code twice and ties
    the two together."""
    test_modules = {p.stem for p in TESTS.glob("test_*.py")} | {"conftest"}
    offenders = [
        f"{path.relative_to(REPO)}:{line}: imports {name}"
        for path in _python_files()
        for line, name in _imported_modules(ast.parse(path.read_text(), str(path)))
        if name.split(".")[0] in test_modules
    ]
    assert offenders == []


def test_no_test_module_defines_its_own_render() -> None:
    """One render helper, support.rendering (render, renderer, render_stdout)."""
    offenders = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted([*TESTS.glob("test_*.py"), TESTS / "conftest.py"])
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "render"
    ]
    assert offenders == []


def test_pytest_is_strict() -> None:
    """An unknown marker is an error and an xfail that passes fails the suite."""
    ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert ini["xfail_strict"] is True
    assert "--strict-markers" in ini["addopts"].split()


def _constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "constraints" / "test.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints/test.txt: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version
    return pins


def test_linters_are_pinned_and_every_test_dependency_is_constrained() -> None:
    """A linter release cannot turn CI red (exact pins in the test extra), and every direct
    test dependency has its exact version in constraints/test.txt (scripts/test installs with
    it; its header says how to refresh it)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [
        Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]
    ]
    pins = _constraints()
    for name in ("ruff", "mypy", "types-pyyaml", "import-linter"):
        (req,) = [r for r in reqs if canonicalize_name(r.name) == name]
        assert str(req.specifier).startswith("=="), f"{req} is not pinned exactly"
        assert req.specifier == SpecifierSet(f"=={pins[name]}"), (req, pins[name])
    missing = [str(r) for r in reqs if canonicalize_name(r.name) not in pins]
    assert missing == []
    outside = [
        f"{r.name}=={pins[canonicalize_name(r.name)]}"
        for r in reqs
        if not r.specifier.contains(pins[canonicalize_name(r.name)])
    ]
    assert outside == []
