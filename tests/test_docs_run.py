"""Docs that run: every shell block of the README and ``docs/`` is run here as written, is run
by a named test, or is marked as needing a real cluster (``support/docblocks.py`` says how a
block is marked). A block nobody runs goes stale silently; this makes it fail instead."""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.binaries import built_dir, missing_component
from support.docblocks import Block, blocks, make_checkout, make_workspace
from support.paths import REPO

BLOCKS = blocks(REPO)
RUN = [b for b in BLOCKS if b.kind == "run"]


def test_every_shell_block_is_run_or_marked() -> None:
    unmarked = [b.id for b in BLOCKS if b.kind is None]
    assert unmarked == [], (
        "shell blocks without a <!-- doc-test: run | by tests/x.py::name | cluster --> "
        "marker on the line before them"
    )


def test_most_blocks_run_here() -> None:
    """Marking a block ``cluster`` is for what needs a cluster or a registry, not a way out:
    the blocks a reader runs on a laptop (render, validate, diff, hydrate, the Helm and KRM
    entry points) are run here."""
    assert len(RUN) >= 6, [b.id for b in RUN]


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
    }


def test_blocks_run_by_a_named_test_name_one_that_exists() -> None:
    wrong = []
    for b in (b for b in BLOCKS if b.kind == "by"):
        file, _, name = b.arg.partition("::")
        path = REPO / file
        if not name or not path.is_file() or name not in _test_names(path):
            wrong.append(f"{b.id}: {b.arg!r}")
    assert wrong == [], "doc-test: by <tests/file.py::test_name> names no test"


def _path() -> str:
    """The reader's PATH: this Python's scripts (``dyn-gitops``), Go, the real helm,
    kustomize and flux built for the tests, and the system's."""
    go = shutil.which("go")
    dirs = [Path(sys.executable).parent, *([Path(go).parent] if go else [])]
    for env, script in (
        ("DYN_GITOPS_TEST_BINS", "build.sh"),
        ("DYN_GITOPS_FLUX_BINS", "build-flux.sh"),
    ):
        found = built_dir(env, REPO / "tools" / "test-bins" / script)
        if found is not None and found.is_dir():
            dirs.append(found)
    return os.pathsep.join([*map(str, dirs), "/usr/local/bin", "/usr/bin", "/bin"])


def _needs(block: Block, path: str) -> None:
    for tool in ("dyn-gitops", "helm", "kustomize", "flux", "go"):
        # the test-binary build scripts run Go
        used = f"{tool} " in block.body or (tool == "go" and "tools/test-bins/" in block.body)
        if used and not any((Path(d) / tool).exists() for d in path.split(os.pathsep)):
            missing_component(f"{block.id} runs {tool}, which is not built here")


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_the_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    """In a reader's repository (``make_workspace``: ``deploy/``, a chart, Git history with
    an ``origin``), with ``set -euo pipefail``: every command of the block exits 0."""
    ws = (
        make_checkout(REPO, tmp_path) if block.arg == "checkout" else make_workspace(REPO, tmp_path)
    )
    path = _path()
    _needs(block, path)
    env = {
        "PATH": path,
        # the reader's own: the Go and test-binary caches live under ~/.cache
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        # the code under test where it is not the installed one (a worktree)
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.body],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{block.id} exited {proc.returncode}:\n{proc.stderr[-4000:]}"


#: the PR preview action of this repository, as a workflow names it (owner/repo/path@ref)
PREVIEW_ACTION = "dyn-gitops/dyn-gitops/.github/actions/pr-preview@"


def _pip_requirements(workflow: Path) -> list[str]:
    """What each step installs: its ``pip install`` argument; for the PR preview action, the
    requirement it installs (the repository at the action's own ref, or ``dyn-gitops-ref``)."""
    doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    steps = [step for job in (doc.get("jobs") or {}).values() for step in job.get("steps") or []]
    runs = [step.get("run", "") for step in steps]
    reqs = [m for run in runs for m in re.findall(r"pip install (\"[^\"]+\"|\S+)", run)]
    for step in steps:
        uses = str(step.get("uses", ""))
        if uses.startswith(PREVIEW_ACTION):
            ref = (step.get("with") or {}).get("dyn-gitops-ref") or uses.removeprefix(
                PREVIEW_ACTION
            )
            reqs.append(f'"dyn-gitops @ git+https://github.com/dyn-gitops/dyn-gitops@{ref}"')
    return reqs


@pytest.fixture(scope="module")
def source_repository(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A Git repository holding this tree as it is (a checkout or not, edits included) and
    its one commit."""
    repo = tmp_path_factory.mktemp("source") / "dyn-gitops"
    shutil.copytree(
        REPO,
        repo,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.egg-info", "build", ".*_cache", ".hypothesis"
        ),
    )
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "tree"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=120)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    return repo, head


CI_SAMPLES = sorted((REPO / "samples" / "ci").glob("*.yaml"))


@pytest.mark.parametrize("workflow", CI_SAMPLES, ids=[p.name for p in CI_SAMPLES])
def test_ci_samples_install_dyn_gitops_from_source(
    workflow: Path, tmp_path: Path, source_repository: tuple[Path, str]
) -> None:
    """Nothing is on PyPI yet, so ``pip install dyn-gitops==0.1.0`` fails: a CI sample
    installs from a Git ref of the repository. The requirement it writes is installed here
    with the repository swapped for a Git repository of this tree (same form, its commit as
    the ref)."""
    reqs = _pip_requirements(workflow)
    assert reqs, f"{workflow.name} installs nothing"
    for req in reqs:
        m = re.fullmatch(
            r'"dyn-gitops @ git\+https://github\.com/dyn-gitops/dyn-gitops@([^"]+)"', req
        )
        assert m, f"{workflow.name}: {req} is not a Git install of dyn-gitops"
    repo, head = source_repository
    local = f"dyn-gitops @ git+file://localhost{repo}@{head}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(tmp_path / "site"),
            local,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "dyn_gitops" / "__init__.py").exists()


def _yaml_snippets() -> list[tuple[str, object]]:
    """Every YAML document of the docs' ``yaml`` blocks and of deploy/ and samples/."""
    out: list[tuple[str, object]] = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", text, flags=re.S)):
            with contextlib.suppress(yaml.YAMLError):
                out += [(f"{doc.name} yaml block {i}", d) for d in yaml.safe_load_all(block)]
    for path in sorted([*(REPO / "deploy").rglob("*.yaml"), *(REPO / "samples").rglob("*.yaml")]):
        with contextlib.suppress(yaml.YAMLError):
            out += [(str(path.relative_to(REPO)), d) for d in yaml.safe_load_all(path.read_text())]
    return out


def test_every_application_names_the_versioned_plugin() -> None:
    """Argo CD finds a sidecar plugin by ``<metadata.name>-<spec.version>`` of its
    plugin.yaml; an Application naming ``dyn-gitops`` alone matches nothing (the repo-server
    logs say to name ``dyn-gitops-<version>``)."""
    from dyn_gitops import __version__

    wrong = []
    for where, doc in _yaml_snippets():
        if not isinstance(doc, dict) or doc.get("kind") != "Application":
            continue
        spec = doc.get("spec") or {}
        dry = (spec.get("sourceHydrator") or {}).get("drySource") or {}
        for source in [spec.get("source") or {}, *(spec.get("sources") or []), dry]:
            plugin = source.get("plugin") if isinstance(source, dict) else None
            name = plugin.get("name") if isinstance(plugin, dict) else None
            if name is not None and name != f"dyn-gitops-{__version__}":
                wrong.append(f"{where}: plugin.name {name!r}")
    assert wrong == []


# --------------------------------------------------------------- blocks a reader runs as is
_COMMAND_SPLIT = re.compile(r"&&|\|\||[;|(]|\$\(")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


def _commands(body: str) -> list[str]:
    """The first word of every command in a shell block (after ``sudo``, ``env``, ``time``
    and variable assignments); continuation lines are joined first."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0]
        for part in _COMMAND_SPLIT.split(line):
            words = [w for w in part.split() if not _ASSIGNMENT.match(w)]
            while words and words[0] in ("sudo", "env", "time", "exec", "!"):
                words = words[1:]
            if words:
                out.append(words[0])
    return out


def _modes() -> dict[str, str]:
    """Each file's mode as Git stores it (``100755``/``100644``): what a clone gets. Outside a
    Git checkout (an unpacked source archive) the files' own modes, in Git's notation."""
    proc = subprocess.run(
        ["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if proc.returncode == 0:
        return {ln.split("\t", 1)[1]: ln.split()[0] for ln in proc.stdout.splitlines()}
    return {
        str(p.relative_to(REPO)): "100755" if os.access(p, os.X_OK) else "100644"
        for p in REPO.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }


def test_scripts_the_docs_run_directly_are_executable_in_git() -> None:
    """A script the docs run by its path (``sudo tools/images/build.sh``) must be committed
    executable: a clone gets Git's mode, not the author's ``chmod``, and the reader gets
    "Permission denied" (the install walkthrough met exactly that)."""
    modes = _modes()
    wrong = sorted(
        {
            f"{b.id}: {word} is {modes[rel]}"
            for b in BLOCKS
            for word in _commands(b.body)
            if "/" in word and (rel := word.removeprefix("./")) in modes and modes[rel] != "100755"
        }
    )
    assert wrong == [], "run by path in the docs but not executable in Git"


def test_the_install_page_names_the_charts_own_deployment(test_binaries: Any) -> None:
    """docs/install.md waits for the controller with ``rollout status deployment/<name>``:
    the name must be the one the chart gives the Deployment for the release and namespace
    the page installs (helm template of the real chart)."""
    (block,) = [b for b in BLOCKS if "helm upgrade --install" in b.body and "charts/" in b.body]
    install = re.search(r"helm upgrade --install (\S+) (charts/\S+) -n (\S+)", block.body)
    waits = re.findall(r"-n (\S+) rollout status deployment/(\S+)", block.body)
    assert install and waits, block.body
    release, chart, namespace = install.groups()
    helm = test_binaries("helm")["helm"]
    proc = subprocess.run(
        [str(helm), "template", release, str(REPO / chart), "-n", namespace],
        capture_output=True,
        text=True,
        check=True,
    )
    made = {
        (o["metadata"].get("namespace", namespace), o["metadata"]["name"])
        for o in yaml.safe_load_all(proc.stdout)
        if o and o.get("kind") == "Deployment"
    }
    assert {tuple(w) for w in waits} <= made, (
        f"{block.id}: waits for {waits}; the chart makes {made}"
    )


def _walkthrough() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "walkthrough", REPO / "tools/install_walkthrough.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_install_walkthrough_takes_every_block_of_the_install_page() -> None:
    """tools/install_walkthrough.py (the closing note's run from a fresh clone to a running
    graph) knows each block of docs/install.md and each of its steps is a block there, so a
    new or changed block cannot be left out of it silently."""
    walk = _walkthrough()
    page = [b for b in BLOCKS if b.path == walk.PAGE]
    unknown = [b.id for b in page if walk.step_of(b.body) is None]
    assert unknown == [], "blocks of docs/install.md the walkthrough does not know"
    taken = {walk.step_of(b.body).title for b in page}
    assert taken == {s.title for s in walk.STEPS}, "walkthrough steps with no block"
