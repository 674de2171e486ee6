"""The rough edges a new user hit (issue 16, point 4): one test each.

Each test names the edge it pins; the fix is described in the docs it points to.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import yaml
from conftest import AS_APPLIED_FLAGS, REPO, invoke_cli, run_cli, small_dgd


def _objects(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


# ------------------------------------------------------------- dyn-gitops.yaml in each folder
def test_a_settings_file_in_each_app_folder_applies_to_its_own_subtree(tmp_path: Path) -> None:
    """``dyn-gitops.yaml`` beside each app (apps/a, apps/b) is recognised wherever it sits:
    ``validate apps/`` (what the pre-commit hook runs) reads it as settings, not as a
    Kubernetes object, and each applies to its own subtree (the nearest wins, over the
    root's); from a Git revision too."""
    apps = tmp_path / "apps"
    for app, ns in (("a", "team-a"), ("b", "team-b"), ("c", None)):
        (apps / app).mkdir(parents=True)
        (apps / app / "dgd.yaml").write_text(small_dgd(f"graph-{app}"), encoding="utf-8")
        if ns:
            (apps / app / "dyn-gitops.yaml").write_text(f"namespace: {ns}\n", encoding="utf-8")
    (apps / "dyn-gitops.yaml").write_text("namespace: shared\n", encoding="utf-8")

    res = invoke_cli("validate", *AS_APPLIED_FLAGS, str(apps))
    assert res.code == 0, res.stderr
    assert "not a Kubernetes object" not in res.stderr
    assert "3 files" in res.stderr or "3 DynamoGraphDeployments" in res.stderr

    # the pre-commit hook, exactly as .pre-commit-hooks.yaml declares it
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    entry = next(h for h in hooks if h["id"] == "dyn-gitops-validate")["entry"]
    argv = shlex.split(entry)
    assert argv[:2] == ["dyn-gitops", "validate"]
    hook = run_cli(*argv[1:], *AS_APPLIED_FLAGS, "apps/", cwd=tmp_path)
    assert hook.code == 0, hook.stderr

    def namespaces(text: str) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for obj in _objects(text):
            path = obj["metadata"]["annotations"]["dyn-gitops.io/source-path"]
            out.setdefault(path, set()).add(obj["metadata"]["namespace"])
        return out

    rendered = invoke_cli("render", *AS_APPLIED_FLAGS, str(apps))
    assert rendered.code == 0, rendered.stderr
    assert namespaces(rendered.stdout) == {
        "a/dgd.yaml": {"team-a"},
        "b/dgd.yaml": {"team-b"},
        "c/dgd.yaml": {"shared"},
    }

    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "apps")
    from_git = run_cli("render", *AS_APPLIED_FLAGS, "--rev", "HEAD", "apps", cwd=tmp_path)
    assert from_git.code == 0, from_git.stderr
    assert namespaces(from_git.stdout) == namespaces(rendered.stdout)

    # a broken subtree settings file is named, nothing rendered
    (apps / "b" / "dyn-gitops.yaml").write_text("namespace: [x\n", encoding="utf-8")
    bad = invoke_cli("render", *AS_APPLIED_FLAGS, str(apps))
    assert bad.code == 1 and bad.stdout == ""
    assert "b/dyn-gitops.yaml" in bad.stderr
