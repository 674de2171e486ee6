"""Bad and hostile input: exit 1, nothing on stdout, and every problem as
``file:line: Kind/name: field.path: message`` on stderr, without a Python traceback.

Most cases run the CLI in-process (click's runner: same commands, exit codes and streams);
the ones where the process itself matters run the real entry point in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import invoke_cli, run_cli
from support.refusals import assert_refused, problem, write

GOOD_CM = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: fine
data:
  k: v
"""


# ----------------------------------------------------------------------------- malformed YAML
def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    write(
        tmp_path / "broken.yaml",
        GOOD_CM
        + "---\n"
        + (
            "apiVersion: v1\n"  # 8
            "kind: ConfigMap\n"  # 9
            "metadata:\n"  # 10
            "  name: broken\n"  # 11
            "data:\n"  # 12
            "  a: b: c\n"
        ),
    )  # 13: mapping values are not allowed here
    res = run_cli("render", str(tmp_path))
    assert_refused(res, "malformed YAML")
    problem(res, "broken.yaml", 13)


# ----------------------------------------------------------------------------- unknown fields
UNKNOWN_FIELDS = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: typo
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: 1
    VllmWorker:
      componentType: worker
      replicsa: 2
      extraPodSpec:
        mainContainr:
          image: example.com/vllm:1
"""


def test_unknown_fields_suggest_the_right_name(tmp_path: Path) -> None:
    write(tmp_path / "dgd.yaml", UNKNOWN_FIELDS)
    res = invoke_cli("render", str(tmp_path))
    assert_refused(res)
    replicas = problem(
        res, "dgd.yaml", 12, "DynamoGraphDeployment/typo", "spec.services.VllmWorker.replicsa"
    )
    assert "'replicsa'" in replicas and "did you mean 'replicas'" in replicas, replicas
    main = problem(
        res,
        "dgd.yaml",
        14,
        "DynamoGraphDeployment/typo",
        "spec.services.VllmWorker.extraPodSpec.mainContainr",
    )
    assert "did you mean 'mainContainer'" in main, main


# ----------------------------------------------------------------------------- webhook rules
def test_negative_replicas(tmp_path: Path) -> None:
    write(
        tmp_path / "neg.yaml",
        """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: neg
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: -1
""",
    )
    res = invoke_cli("render", str(tmp_path))
    assert_refused(res)
    line = problem(
        res, "neg.yaml", 9, "DynamoGraphDeployment/neg", "spec.services.Frontend.replicas"
    )
    assert "-1" in line, f"the message should show what was found: {line}"


def test_service_names_colliding_case_insensitively(tmp_path: Path) -> None:
    write(
        tmp_path / "collide.yaml",
        """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: clash
spec:
  services:
    Worker:
      componentType: worker
    worker:
      componentType: worker
""",
    )
    res = invoke_cli("render", str(tmp_path))
    assert_refused(res)
    lines = [
        ln
        for ln in res.stderr.splitlines()
        if re.match(
            r"collide\.yaml:(7|9): DynamoGraphDeployment/clash: "
            r"spec\.services\.(Worker|worker): ",
            ln,
        )
    ]
    assert lines, res.stderr
    assert "'Worker'" in lines[0] and "'worker'" in lines[0], lines[0]


def test_graph_without_services(tmp_path: Path) -> None:
    write(
        tmp_path / "empty-graph.yaml",
        """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: hollow
spec: {services: {}}
""",
    )
    res = invoke_cli("render", str(tmp_path))
    assert_refused(res)
    problem(res, "empty-graph.yaml", 5, "DynamoGraphDeployment/hollow", "spec.services")


# ----------------------------------------------------------------------------- hostile input
@pytest.fixture
def outside_link(tmp_path: Path) -> tuple[Path, Path]:
    """A source dir with a good file and a symlink to a file outside the root."""
    root = tmp_path / "src"
    write(root / "ok.yaml", GOOD_CM)
    outside = write(
        tmp_path / "private" / "secret.yaml",
        GOOD_CM.replace("fine", "outside").replace("k: v", "token: s3cr3t-value"),
    )
    (root / "link.yaml").symlink_to(outside)
    return root, outside


def test_symlink_leaving_the_root_is_refused(outside_link: tuple[Path, Path]) -> None:
    root, _ = outside_link
    res = invoke_cli("render", str(root))
    assert_refused(res, "link.yaml", "outside the source root")
    assert "s3cr3t-value" not in res.stderr


def test_symlinked_directory_leaving_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "src"
    write(root / "ok.yaml", GOOD_CM)
    write(tmp_path / "elsewhere" / "x.yaml", GOOD_CM.replace("fine", "elsewhere"))
    (root / "sub").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    res = invoke_cli("render", str(root))
    assert_refused(res, "sub", "outside the source root")


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "small.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n")
    big = write(tmp_path / "big.yaml", GOOD_CM + "  padding: " + "x" * 200 + "\n")
    res = invoke_cli("render", str(tmp_path), "--max-file-bytes", "100")
    assert_refused(res, "big.yaml", "max-file-bytes", str(big.stat().st_size))
    assert "small.yaml" not in res.stderr


def test_oversized_stdin_is_refused() -> None:
    res = invoke_cli("render", "-", "--max-file-bytes", "100", stdin=GOOD_CM * 5)
    assert_refused(res, "max-file-bytes")


def billion_laughs(levels: int = 9) -> str:
    lines = [
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: lol",
        "data:",
        '  l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    for i in range(1, levels + 1):
        lines.append(f"  l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    """Refused before expansion: expanding 10**9 nodes would outlast run_cli's 120 s hang
    guard (and the memory), so no wall-clock assertion is needed."""
    write(tmp_path / "lol.yaml", billion_laughs())  # 10**9 nodes once expanded
    res = run_cli("render", str(tmp_path))
    assert_refused(res, "max-yaml-nodes")
    assert re.search(r"^lol\.yaml:\d+: ", res.stderr, re.M), res.stderr


def test_alias_limit_is_the_setting(tmp_path: Path) -> None:
    """A modest use of aliases renders by default and is refused under a small limit."""
    write(tmp_path / "aliases.yaml", billion_laughs(levels=1))  # ~120 nodes
    assert invoke_cli("render", str(tmp_path)).code == 0
    res = invoke_cli("render", str(tmp_path), "--max-yaml-nodes", "50")
    assert_refused(res, "aliases.yaml", "max-yaml-nodes")


def test_alias_bomb_in_the_settings_file_is_refused_quickly(tmp_path: Path) -> None:
    """dyn-gitops.yaml is input from Git too: its aliases must be bounded like manifests."""
    write(tmp_path / "ok.yaml", GOOD_CM)
    levels = ['&l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"&l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 9)]
    write(tmp_path / "dyn-gitops.yaml", "namespace: [" + ", ".join(levels) + "]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    try:  # 10**9 nodes: expanding them would outlast this hang guard on any machine
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "from dyn_gitops.oneshot import main; main()",
                "render",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("an alias bomb in dyn-gitops.yaml was still being expanded after 120s")
    assert proc.returncode in (1, 2), proc.stderr
    assert proc.stdout == ""
    assert "dyn-gitops.yaml" in proc.stderr and "Traceback" not in proc.stderr


def test_too_many_documents(tmp_path: Path) -> None:
    write(tmp_path / "many.yaml", "---\n".join(GOOD_CM.replace("fine", f"cm{i}") for i in range(3)))
    assert invoke_cli("render", str(tmp_path), "--max-documents", "3").code == 0
    res = invoke_cli("render", str(tmp_path), "--max-documents", "2")
    assert_refused(res, "many.yaml", "max-documents")


@pytest.mark.parametrize("case", ["symlink", "oversized"])
def test_file_level_problems_carry_a_line_number(
    case: str, tmp_path: Path, outside_link: tuple[Path, Path]
) -> None:
    """The contract is ``file:line: ...`` for every problem, including whole-file ones, so
    that editors and CI problem matchers can parse every line."""
    if case == "symlink":
        root, _ = outside_link
        res, name = invoke_cli("render", str(root)), "link.yaml"
    else:
        write(tmp_path / "big" / "big.yaml", GOOD_CM * 3)
        res = invoke_cli("render", str(tmp_path / "big"), "--max-file-bytes", "100")
        name = "big.yaml"
    assert_refused(res)
    assert re.search(rf"^{re.escape(name)}:\d+: ", res.stderr, re.M), (
        f"no '{name}:<line>:' prefix in:\n{res.stderr}"
    )


# ----------------------------------------------------------------------------- empty input
def test_empty_directory_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_refused(invoke_cli("render", str(empty)), "allow-empty")


def test_empty_directory_allowed_explicitly(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    res = invoke_cli("render", str(empty), "--allow-empty")
    assert res.code == 0, res.stderr
    assert res.stdout.strip() == ""
    assert "Traceback" not in res.stderr


def test_directory_of_ignored_files_is_empty(tmp_path: Path) -> None:
    write(tmp_path / "README.md", "# notes\n")
    write(tmp_path / ".hidden" / "x.yaml", GOOD_CM)
    assert_refused(invoke_cli("render", str(tmp_path)), "allow-empty")


# ----------------------------------------------------------------------------- all at once
def test_every_problem_in_every_file_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "a-typo.yaml", UNKNOWN_FIELDS)  # two problems
    write(tmp_path / "b-broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  a: b: c\n")
    write(
        tmp_path / "nested" / "c-neg.yaml",
        """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: neg
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: -3
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
""",
    )
    write(tmp_path / "d-fine.yaml", GOOD_CM)
    res = run_cli("render", str(tmp_path))
    assert_refused(res, "4 problems found")
    problem(res, "a-typo.yaml", 12, "DynamoGraphDeployment/typo")
    problem(res, "a-typo.yaml", 14, "DynamoGraphDeployment/typo")
    problem(res, "b-broken.yaml", 4)
    problem(
        res, "nested/c-neg.yaml", 9, "DynamoGraphDeployment/neg", "spec.services.Frontend.replicas"
    )
    assert "d-fine.yaml" not in res.stderr


def test_validate_reports_the_same_problems(tmp_path: Path) -> None:
    write(tmp_path / "dgd.yaml", UNKNOWN_FIELDS)
    res = invoke_cli("validate", str(tmp_path))
    assert_refused(res, "2 problems found")
    problem(res, "dgd.yaml", 12, "DynamoGraphDeployment/typo")


# ----------------------------------------------------------------------------- usage errors
def test_unknown_flag_is_a_usage_error(tmp_path: Path) -> None:
    write(tmp_path / "ok.yaml", GOOD_CM)
    assert_refused(run_cli("render", str(tmp_path), "--namespce", "x"), "--namespce", code=2)


def test_unknown_environment_setting_is_a_usage_error(tmp_path: Path) -> None:
    write(tmp_path / "ok.yaml", GOOD_CM)
    res = invoke_cli("render", str(tmp_path), env={"DYN_GITOPS_NAMESPCE": "x"})
    assert_refused(res, "DYN_GITOPS_NAMESPCE", "did you mean 'namespace'", code=2)


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    assert_refused(invoke_cli("render", str(tmp_path / "nope")), "nope", code=2)


# ------------------------------------------------------------------------------ warnings
NO_IMAGE = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: snippet
spec:
  services:
    Frontend:
      replicas: 2
    decode:
      replicas: 1
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.1.0
"""


def test_a_service_without_image_renders_with_a_warning(tmp_path: Path) -> None:
    # the operator renders it too (no default image); the API server will refuse the
    # Deployment, so the user hears it now, with file, line and field. The 1.5 admission
    # (default, #10494) refuses it at the same field; lenient renders it as before 1.5.
    (tmp_path / "dgd.yaml").write_text(NO_IMAGE)
    strict = run_cli("render", str(tmp_path / "dgd.yaml"))
    assert_refused(strict, "1 problem found")
    problem(
        strict,
        "dgd.yaml",
        7,
        "DynamoGraphDeployment/snippet",
        "spec.services.Frontend.extraPodSpec.mainContainer.image: is required",
    )
    res = run_cli("render", str(tmp_path / "dgd.yaml"), "--runtime-version-admission", "lenient")
    assert res.code == 0, res.stderr
    assert "kind: Deployment" in res.stdout
    assert res.stderr.splitlines() == [
        "dgd.yaml:7: DynamoGraphDeployment/snippet: "
        "spec.services.Frontend.extraPodSpec.mainContainer.image: no image: the operator has "
        "no default image, and the API server refuses a workload whose main container has "
        "none (warning)"
    ]


def test_warnings_reach_krm_results(tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load(NO_IMAGE)
    rl = {"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": [doc]}
    lenient = {"DYN_GITOPS_RUNTIME_VERSION_ADMISSION": "lenient"}  # no image: pre-1.5 DGD
    res = run_cli("krm", stdin=yaml.safe_dump(rl), env=lenient)
    assert res.code == 0, res.stderr
    out = yaml.safe_load(res.stdout)
    warnings = [r for r in out["results"] if r["severity"] == "warning"]
    assert len(warnings) == 1 and "no image" in warnings[0]["message"]
    assert warnings[0]["field"]["path"] == "spec.services.Frontend.extraPodSpec.mainContainer.image"
    assert "(warning)" in res.stderr
