"""The shell blocks of the README and ``docs/``, and how each is kept true.

Every fenced block whose info string is a shell (``bash``, ``sh``, ``shell``, ``console``)
is preceded (blank lines aside) by one marker comment:

- ``<!-- doc-test: run -->``: ``tests/test_docs_run.py`` runs it as written, in a scratch
  workspace (:func:`make_workspace`: a reader's GitOps repository);
- ``<!-- doc-test: run checkout -->``: the same, in a checkout of this repository
  (:func:`make_checkout`: its top-level entries linked into a scratch directory, so what
  the block writes stays there);
- ``<!-- doc-test: by tests/test_x.py::test_name -->``: that test runs it (or exactly what
  it does, offline, as the text beside it says);
- ``<!-- doc-test: cluster -->``: it needs a real cluster or registry, which a reader has and
  this machine has not.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

SHELLS = frozenset({"bash", "sh", "shell", "console"})
MARKER = re.compile(r"^<!--\s*doc-test:\s*(?P<kind>run|cluster|by)\b\s*(?P<arg>\S*)\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)")


@dataclass(frozen=True)
class Block:
    path: Path  # relative to the repository
    line: int  # of the opening fence, 1-based
    info: str
    body: str
    kind: str | None  # run | cluster | by | None (unmarked)
    arg: str = ""

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def documents(repo: Path) -> list[Path]:
    """The README and every page under ``docs/``."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def blocks(repo: Path) -> list[Block]:
    """Every shell block of :func:`documents`, with the marker before it."""
    out: list[Block] = []
    for doc in documents(repo):
        lines = doc.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(m["fence"])),
                len(lines),
            )
            if m["info"] in SHELLS:
                marker = _marker_before(lines, i)
                out.append(
                    Block(
                        doc.relative_to(repo),
                        i + 1,
                        m["info"],
                        "\n".join(ln[len(m["indent"]) :] for ln in lines[i + 1 : end]) + "\n",
                        marker["kind"] if marker else None,
                        marker["arg"] if marker else "",
                    )
                )
            i = end + 1
    return out


def _marker_before(lines: list[str], fence: int) -> re.Match[str] | None:
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return MARKER.match(lines[j].strip()) if j >= 0 else None


# ------------------------------------------------------------------------ the workspace
def make_workspace(repo: Path, root: Path) -> Path:
    """A reader's GitOps repository as the docs assume it: ``deploy/`` (the vLLM sample
    and its settings, ``deploy/vllm.yaml``), ``vllm.yaml``, a Helm ``chart/`` holding the
    same graph, a KRM ``resource-list.yaml``, Git history (tags ``v1`` and ``v2``,
    ``main`` pushed to a bare ``origin``), and the repository's ``samples``, ``charts`` and
    ``tools`` beside them (links)."""
    ws = root / "workspace"
    sample = repo / "samples" / "vllm-agg" / "input"
    graph = (sample / "vllm-agg.yaml").read_text(encoding="utf-8")
    (ws / "deploy").mkdir(parents=True)
    (ws / "deploy" / "vllm.yaml").write_text(graph, encoding="utf-8")
    shutil.copy(sample / "dyn-gitops.yaml", ws / "deploy" / "dyn-gitops.yaml")
    (ws / "vllm.yaml").write_text(graph, encoding="utf-8")
    chart = ws / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 0.1.0\n")
    (chart / "templates" / "dgd.yaml").write_text(graph, encoding="utf-8")
    function_config = {
        "apiVersion": "dyn-gitops.io/v1alpha1",
        "kind": "ExpandDynamoGraphs",
        "metadata": {"name": "expand-dynamo"},
        "spec": {"namespace": "demo"},
    }
    resource_list = {
        "apiVersion": "config.kubernetes.io/v1",
        "kind": "ResourceList",
        "items": [yaml.safe_load(graph)],
        "functionConfig": function_config,
    }
    (ws / "resource-list.yaml").write_text(yaml.safe_dump(resource_list), encoding="utf-8")
    for name in ("samples", "charts", "tools"):
        (ws / name).symlink_to(repo / name)
    _git_history(ws, root / "origin.git")
    return ws


def make_checkout(repo: Path, root: Path) -> Path:
    """A scratch directory that looks like a checkout of this repository (each top-level
    entry linked), for the install steps that run from one."""
    co = root / "checkout"
    co.mkdir(parents=True)
    for entry in repo.iterdir():
        if not entry.name.startswith(".") or entry.name == ".github":
            (co / entry.name).symlink_to(entry)
    return co


def _git_history(ws: Path, origin: Path) -> None:
    def git(*args: str, cwd: Path = ws) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)

    (ws / ".gitignore").write_text("samples\ncharts\ntools\n")
    git("init", "-q", "-b", "main")
    git("config", "user.email", "reader@example.com")
    git("config", "user.name", "A reader")
    git("add", "-A")
    git("commit", "-q", "-m", "a graph")
    git("tag", "v1")
    graph = ws / "deploy" / "vllm.yaml"
    graph.write_text(graph.read_text().replace("replicas: 1", "replicas: 2", 1))
    git("commit", "-q", "-am", "two frontends")
    git("tag", "v2")
    git("init", "-q", "--bare", str(origin), cwd=ws.parent)
    git("remote", "add", "origin", str(origin))
    git("push", "-q", "origin", "main")
    git("fetch", "-q", "origin")
