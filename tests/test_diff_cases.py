"""``dyn-gitops diff`` on the four changes a reviewer meets most: each alone, with the
report it must produce and diff's exit code (1 when different)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli
from support.workflow_repo import TREE, Repo

NEW_SERVICE = """\
    Planner:
      componentType: planner
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
"""


def _edit(old: str, new: str) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        text = (d / "agg.yaml").read_text()
        assert old in text, old
        (d / "agg.yaml").write_text(text.replace(old, new, 1))

    return apply


def _remove_pair_b(d: Path) -> None:
    (d / "pair.yaml").write_text((d / "pair.yaml").read_text().split("---\n")[0])


CASES: dict[str, tuple[Callable[[Path], None], list[str], list[str]]] = {
    # name: (change, lines that must be in the report, lines that must not)
    "replica change": (
        _edit(
            "    Frontend:\n      componentType: frontend\n      replicas: 1",
            "    Frontend:\n      componentType: frontend\n      replicas: 2",
        ),
        ["~ Deployment demo/agg-frontend", "    ~ spec.replicas: 1 -> 2"],
        ["new worker generation"],
    ),
    "image change": (
        _edit(
            "    Frontend:\n      componentType: frontend\n      replicas: 1\n"
            "      extraPodSpec:\n        mainContainer:\n"
            "          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0",
            "    Frontend:\n      componentType: frontend\n      replicas: 1\n"
            "      extraPodSpec:\n        mainContainer:\n"
            "          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.1",
        ),
        [
            "~ Deployment demo/agg-frontend",
            "    ~ spec.template.spec.containers[name=main].image: "
            '"nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0" -> '
            '"nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.1"',
        ],
        [],
    ),
    "added service": (
        _edit("  services:\n", "  services:\n" + NEW_SERVICE),
        ["+ Deployment demo/agg-planner", "+ Service demo/agg-planner"],
        ["- Deployment"],
    ),
    "removed DGD": (
        _remove_pair_b,
        ["- Deployment demo/pair-b-frontend", "- DynamoGraphDeployment demo/pair-b"],
        ["+ Deployment"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_change_one_report(case: str, tmp_path: Path) -> None:
    change, present, absent = CASES[case]
    r = Repo(tmp_path / "repo")
    shutil.copytree(TREE, r.path / "deploy")
    base = r.commit("base")
    change(r.path / "deploy")
    head = r.commit(case)
    res = run_cli("diff", "--base", base, "--head", head, "deploy", cwd=r.path)
    assert res.code == 1, res.stderr  # different, as diff(1) says
    lines = res.stdout.splitlines()
    for line in present:
        assert line in lines, f"{line!r} missing from:\n{res.stdout}"
    for fragment in absent:
        assert not any(fragment in line for line in lines), res.stdout
    md = run_cli(
        "diff", "--base", base, "--head", head, "--format", "markdown", "deploy", cwd=r.path
    )
    assert md.code == 1, md.stderr
    assert md.stdout.startswith("### dyn-gitops diff"), md.stdout
    kind, _, name = present[0][2:].partition(" ")
    ns, _, obj = name.partition("/")
    assert f"| {kind} | {ns} | {obj} |" in md.stdout, md.stdout
    same = run_cli("diff", "--base", head, "--head", head, "deploy", cwd=r.path)
    assert same.code == 0, same.stderr
    assert "no differences" in same.stdout
