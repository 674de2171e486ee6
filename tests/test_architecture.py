"""The layer contracts of ARCHITECTURE.md hold, and would catch a break.

The contracts live in pyproject.toml ([tool.importlinter]); import-linter checks them on
the import graph (imports inside functions count, imports only for type checking do not).
Each contract is also shown to fail: a copy of the sources with one deliberate violation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from support.paths import REPO

LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"
)


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the sources under ``root`` (which must come first on the path)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "operator")])}
    return subprocess.run(
        [sys.executable, "-c", LINT], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_layer_contracts_hold() -> None:
    proc = _lint(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" not in proc.stdout.lower().replace("0 broken", "")


def _copy_sources(tmp: Path) -> Path:
    root = tmp / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "dyn_gitops", root / "dyn_gitops", ignore=ignore)
    shutil.copytree(
        REPO / "operator" / "dyn_gitops_operator",
        root / "operator" / "dyn_gitops_operator",
        ignore=ignore,
    )
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


VIOLATIONS = [
    # (module file, the import added at its end, the contract that must break)
    ("dyn_gitops/expand/graph.py", "from ..cli import main", "render side in layers"),
    ("dyn_gitops/rules.py", "from .expand import graph", "render side in layers"),
    ("dyn_gitops/pipeline.py", "from .workflows import diff", "render side in layers"),
    ("dyn_gitops/read.py", "from .validate import validate", "render side in layers"),
    ("dyn_gitops/emit.py", "import kubernetes", "render side imports no controller"),
    (
        "dyn_gitops/finalize.py",
        "import dyn_gitops_operator.kube",
        "render side imports no controller",
    ),
    (
        "operator/dyn_gitops_operator/graph.py",
        "from dyn_gitops.expand import podspec",
        "controller imports only render models",
    ),
    (
        "operator/dyn_gitops_operator/reconcilers/status.py",
        "from dyn_gitops import pipeline",
        "controller imports only render models",
    ),
]


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    VIOLATIONS,
    ids=[f"{m.rsplit('/', 1)[-1]}:{ln}" for m, ln, _ in VIOLATIONS],
)
def test_a_deliberate_violation_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    root = _copy_sources(tmp_path)
    target = root / module
    target.write_text(target.read_text() + f"\n{line}  # deliberate violation\n")
    proc = _lint(root)
    assert proc.returncode != 0, proc.stdout
    broken = [ln for ln in proc.stdout.splitlines() if ln.endswith("BROKEN")]
    assert any(ln.startswith(contract) for ln in broken), proc.stdout


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of more than one
    module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_there_is_no_import_cycle() -> None:
    graph = grimp.build_graph(
        "dyn_gitops", "dyn_gitops_operator", cache_dir=None, exclude_type_checking_imports=True
    )
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")]:
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == [["a", "b", "c"]]


#: the console script: it starts and ends the process around the CLI (dyn_gitops.oneshot)
PROCESS_ENTRY = "dyn_gitops.oneshot"


def test_no_module_outside_the_cli_imports_it() -> None:
    graph = grimp.build_graph("dyn_gitops", "dyn_gitops_operator", cache_dir=None)
    cli = graph.find_descendants("dyn_gitops.cli") | {"dyn_gitops.cli"}
    importers = {m for module in cli for m in graph.find_modules_that_directly_import(module)}
    assert sorted(importers - cli - {PROCESS_ENTRY}) == []


# ----------------------------------------------------------------- step functions stay short
#: the longest a function of the render side may be (issue 25, point 8: long step functions
#: hide their steps; a longer one is split into named steps)
MAX_FUNCTION_LINES = 60


def _long_functions(root: Path, limit: int) -> list[str]:
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines})")
    return found


def test_no_render_side_function_is_longer_than_60_lines() -> None:
    assert _long_functions(REPO / "dyn_gitops", MAX_FUNCTION_LINES) == []


def test_the_function_length_check_finds_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "mod.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}")
    found = _long_functions(tmp_path, MAX_FUNCTION_LINES)
    assert [f.split(" ")[1] for f in found] == ["long"]
