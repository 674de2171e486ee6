"""Limits are a ceiling set by whoever runs the tool (issue 11, point 3).

Each limit is hit once with a small value set by flag, so the inputs stay small. Then the
trust rule: settings that come with the input (``dyn-gitops.yaml``, Argo CD Application
parameters and plugin env, a KRM functionConfig) may lower a limit but never raise it; the
runner's flags and ``DYN_GITOPS_*`` environment may.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliResult, invoke_cli, run_cli
from support.inputs import resource_list, small_dgd

from dyn_gitops.settings import DEPTH_MAX, LIMIT_MAX, REGISTRY, SettingsError, resolve

DGD = small_dgd("limits")

BETA = """\
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata:
  name: beta
spec:
  components:
  - name: Frontend
    type: frontend
    replicas: 1
    podTemplate:
      spec:
        containers:
        - name: main
          image: example.com/dynamo:1.1.0
  - name: decode
    type: decode
    replicas: 7
    multinode:
      nodeCount: 6
    podTemplate:
      spec:
        containers:
        - name: main
          image: example.com/dynamo:1.1.0
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen3-0.6B]
          resources:
            limits:
              nvidia.com/gpu: "1"
"""

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\ndata:\n  k: v\n"


def assert_refused(res: CliResult, code: int, *needles: str) -> None:
    assert res.code == code, f"exit {res.code}\nstderr:\n{res.stderr}\nstdout:\n{res.stdout[:300]}"
    assert res.stdout == ""
    assert "Traceback" not in res.stderr
    for needle in needles:
        assert needle in res.stderr, f"{needle!r} not in:\n{res.stderr}"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    d = tmp_path / "app"
    d.mkdir()
    (d / "dgd.yaml").write_text(DGD)
    return d


def count(res: CliResult) -> int:
    assert res.code == 0, res.stderr
    return len([d for d in yaml.safe_load_all(res.stdout) if d])


def settings_file(src: Path, values: dict[str, Any]) -> None:
    (src / "dyn-gitops.yaml").write_text(yaml.safe_dump(values))


# ----------------------------------------------------------------------------- each limit
def test_max_objects(src: Path) -> None:
    n = count(invoke_cli("render", str(src)))
    assert count(invoke_cli("render", str(src), "--max-objects", str(n))) == n
    res = invoke_cli("render", str(src), "--max-objects", str(n - 1))
    assert_refused(
        res,
        1,
        "dgd.yaml:1: DynamoGraphDeployment/limits: ",
        f"reaches {n} objects",
        f"more than the {n - 1} allowed (setting max-objects)",
    )


def test_max_objects_counts_what_is_output_across_files(src: Path) -> None:
    """Pass-through objects count too; stop at the document that crosses the limit."""
    (src / "dgd.yaml").unlink()
    (src / "cms.yaml").write_text("---\n".join(CM.format(i=i) for i in range(5)))
    assert count(invoke_cli("render", str(src), "--max-objects", "5")) == 5
    res = invoke_cli("render", str(src), "--max-objects", "3")
    assert_refused(res, 1, "cms.yaml:", "ConfigMap/cm-3: ", "(setting max-objects)")
    assert "cm-4" not in res.stderr  # expansion stopped there


def multinode_dgd(*, replicas: int, node_count: int) -> str:
    """DGD with its worker multinode (vLLM, so the renderer knows how to launch it)."""
    return DGD.replace(
        "      replicas: 3\n",
        f"      replicas: {replicas}\n      multinode:\n        nodeCount: {node_count}\n",
    ).replace(
        "dynamo:1.1.0\n",
        "dynamo:1.1.0\n          command: [python3, -m, dynamo.vllm]\n"
        "          args: [--model, Qwen/Qwen3-0.6B]\n",
    )


def test_max_objects_is_checked_before_leader_worker_sets_are_made(src: Path) -> None:
    """Native LWS scaling (#9612, v1.2): one LeaderWorkerSet per multinode service whatever
    its replicas, no PodGroup, so 60 replicas make no more objects than 1 and max-objects
    is checked on what was made (nothing is refused up front any more)."""
    one = multinode_dgd(replicas=1, node_count=2)
    (src / "dgd.yaml").write_text(one)
    made = count(invoke_cli("render", str(src), "--lws"))
    (src / "dgd.yaml").write_text(multinode_dgd(replicas=60, node_count=2))
    assert count(invoke_cli("render", str(src), "--lws")) == made < 20
    res = invoke_cli("render", str(src), "--lws", "--max-objects", str(made - 1))
    assert_refused(res, 1, f"more than the {made - 1} allowed (setting max-objects)")


def test_max_output_bytes(src: Path, tmp_path: Path) -> None:
    text = invoke_cli("render", str(src)).stdout
    size = len(text.encode())
    assert invoke_cli("render", str(src), "--max-output-bytes", str(size)).stdout == text
    res = invoke_cli("render", str(src), "--max-output-bytes", str(size - 1))
    assert_refused(
        res,
        1,
        f"the output is {size} bytes, more than the {size - 1} allowed (setting max-output-bytes)",
    )
    # JSON is measured as JSON
    js = invoke_cli("render", str(src), "--output-format", "json").stdout
    res = invoke_cli(
        "render",
        str(src),
        "--output-format",
        "json",
        "--max-output-bytes",
        str(len(js.encode()) - 1),
    )
    assert_refused(res, 1, "max-output-bytes")
    # one file per object: nothing is written
    out = tmp_path / "out"
    res = invoke_cli("render", str(src), "--out-dir", str(out), "--max-output-bytes", "100")
    assert_refused(res, 1, f"{out}:1: the output reaches ", "max-output-bytes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app"]  # no stray temporary dir


def test_max_output_bytes_through_cmp_krm_and_post_render(src: Path) -> None:
    res = run_cli(
        "cmp",
        "generate",
        "--server",
        "off",
        cwd=src,
        env={
            "DYN_GITOPS_MAX_OUTPUT_BYTES": "100",
            "ARGOCD_APP_NAMESPACE": "demo",
            "ARGOCD_APP_SOURCE_PATH": "apps/limits",
        },
    )
    assert_refused(res, 1, "(setting max-output-bytes)")
    res = run_cli("krm", "--max-output-bytes", "100", stdin=resource_list([yaml.safe_load(DGD)]))
    assert res.code == 1, res.stderr
    assert "(setting max-output-bytes)" in res.stderr
    res = run_cli("post-render", "--max-output-bytes", "100", stdin=DGD)
    assert_refused(res, 1, "(setting max-output-bytes)")


def git_commit(repo: Path) -> dict[str, str]:
    """Commit the work tree of ``repo`` (created if new); the environment to run git in."""
    env = {
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    cmds = [["add", "-A"], ["commit", "-q", "--allow-empty", "-m", "x"]]
    if not (repo / ".git").exists():
        cmds.insert(0, ["init", "-q", "-b", "main"])
    for cmd in cmds:
        subprocess.run(["git", *cmd], cwd=repo, env=env, check=True, capture_output=True)
    return env


def test_max_output_bytes_and_objects_bound_the_whole_hydrated_tree(tmp_path: Path) -> None:
    """hydrate renders file by file: the limits apply to the sum."""
    repo = tmp_path / "repo"
    (repo / "deploy").mkdir(parents=True)
    for i in range(4):
        (repo / "deploy" / f"cm{i}.yaml").write_text(CM.format(i=i))
    env = git_commit(repo)
    ok = run_cli("hydrate", "deploy", "--out-dir", str(tmp_path / "ok"), cwd=repo, env=env)
    assert ok.code == 0, ok.stderr
    one = len(next((tmp_path / "ok").rglob("configmap_cm-0.yaml")).read_bytes())
    for args, needle in (
        (["--max-objects", "3"], "(setting max-objects)"),
        (["--max-output-bytes", str(3 * one)], "(setting max-output-bytes)"),
    ):
        out = tmp_path / "out"
        res = run_cli("hydrate", "deploy", "--out-dir", str(out), *args, cwd=repo, env=env)
        assert_refused(res, 1, needle)
        assert not out.exists()
        res = run_cli("hydrate", "deploy", *args, cwd=repo, env=env)
        assert_refused(res, 1, needle)


def test_max_replicas(src: Path) -> None:
    text = DGD.replace(
        "      replicas: 2\n",
        "      replicas: 2\n      autoscaling:\n"
        "        enabled: true\n        minReplicas: 1\n        maxReplicas: 9\n",
    )
    (src / "dgd.yaml").write_text(text)
    assert invoke_cli("render", str(src), "--max-replicas", "9").code == 0
    res = invoke_cli("render", str(src), "--max-replicas", "2")
    assert_refused(
        res,
        1,  # every problem of the run, each at its field
        "DynamoGraphDeployment/limits: spec.services.Frontend.autoscaling.maxReplicas: "
        "9 is more than the 2 replicas allowed (setting max-replicas)",
        "DynamoGraphDeployment/limits: spec.services.VllmWorker.replicas: 3 is more "
        "than the 2 replicas allowed (setting max-replicas)",
    )
    assert "Frontend.replicas" not in res.stderr


def test_max_replicas_and_node_count_in_v1beta1(src: Path) -> None:
    (src / "dgd.yaml").write_text(BETA)
    assert (
        invoke_cli("render", str(src), "--lws", "--max-replicas", "7", "--max-node-count", "6").code
        == 0
    )
    res = invoke_cli("render", str(src), "--lws", "--max-replicas", "6", "--max-node-count", "5")
    assert_refused(
        res,
        1,
        "dgd.yaml:17: DynamoGraphDeployment/beta: spec.components[1].replicas: 7 is "
        "more than the 6 replicas allowed (setting max-replicas)",
        "DynamoGraphDeployment/beta: spec.components[1].multinode.nodeCount: 6 is "
        "more than the 5 nodes allowed (setting max-node-count)",
    )


@pytest.mark.parametrize("beta", [False, True], ids=["v1alpha1", "v1beta1"])
def test_min_available_is_bounded_like_replicas(src: Path, beta: bool) -> None:
    """Grove's ``minAvailable`` counts replicas (an int32 of the PodCliqueSet): before,
    10**12 rendered with exit 0 into a clique the API server refuses."""
    big = 10**12
    if beta:
        text = BETA.replace("    replicas: 1\n", f"    replicas: 1\n    minAvailable: {big}\n")
        field = "spec.components[0].minAvailable"
    else:
        text = DGD.replace("      replicas: 2\n", f"      replicas: 2\n      minAvailable: {big}\n")
        field = "spec.services.Frontend.minAvailable"
    (src / "dgd.yaml").write_text(text)
    assert_refused(
        invoke_cli("render", str(src), "--grove"),
        1,
        f"{field}: {big} is more than the 10000 replicas allowed (setting max-replicas)",
    )
    (src / "dgd.yaml").write_text(text.replace(str(big), "2"))
    assert invoke_cli("render", str(src), "--grove").code == 0


def test_max_node_count(src: Path) -> None:
    text = multinode_dgd(replicas=3, node_count=4)
    (src / "dgd.yaml").write_text(text)
    assert invoke_cli("render", str(src), "--lws", "--max-node-count", "4").code == 0
    res = invoke_cli("render", str(src), "--lws", "--max-node-count", "3")
    assert_refused(
        res,
        1,
        "DynamoGraphDeployment/limits: spec.services.VllmWorker.multinode."
        "nodeCount: 4 is more than the 3 nodes allowed (setting "
        "max-node-count)",
    )


def test_huge_counts_are_refused_before_anything_is_made(src: Path) -> None:
    """One address per node (and, before native LWS scaling, #9612, one LeaderWorkerSet per
    replica): with these counts, any work per replica or node before the check would
    exhaust the machine instead of exiting 1."""
    big = 10**30
    alpha = DGD.replace(
        "      replicas: 3\n",
        f"      replicas: {big}\n      multinode:\n        nodeCount: {big}\n",
    )
    beta = BETA.replace("replicas: 7", f"replicas: {big}").replace(
        "nodeCount: 6", f"nodeCount: {big}"
    )
    for text in (alpha, beta):
        (src / "dgd.yaml").write_text(text)
        for extra in ((), ("--grove",)):
            res = invoke_cli("render", str(src), "--lws", *extra)
            assert_refused(res, 1, "(setting max-replicas)", "(setting max-node-count)")


# ----------------------------------------------------------------------------- trust
def test_the_settings_file_may_lower_a_limit(src: Path) -> None:
    settings_file(src, {"max-objects": 2})
    assert_refused(invoke_cli("render", str(src)), 1, "more than the 2 allowed")
    settings_file(src, {"max-replicas": 2})
    assert_refused(invoke_cli("render", str(src)), 1, "(setting max-replicas)")


@pytest.mark.parametrize("name", [s.name for s in REGISTRY if s.group == "limits"])
def test_the_settings_file_cannot_raise_a_limit(src: Path, name: str) -> None:
    """A usage error (exit 2), as every other bad value in dyn-gitops.yaml is: the fix is a
    settings change, not an input change; it names source, value, ceiling and the way up."""
    spec = next(s for s in REGISTRY if s.name == name)
    settings_file(src, {name: spec.default + 1})
    for command in ("render", "settings", "validate"):
        res = invoke_cli(command, str(src))
        assert_refused(
            res,
            2,
            f"dyn-gitops.yaml:1: {name}: found {spec.default + 1}, expected at most "
            f"{spec.default} (the default)",
            "may only lower a limit",
            f"--{name} or {spec.env_var}",
        )


def test_the_runner_raises_the_ceiling_by_flag_or_environment(src: Path) -> None:
    settings_file(src, {"max-documents": 30_000})
    assert_refused(invoke_cli("render", str(src)), 2, "expected at most 20000")
    assert invoke_cli("render", str(src), "--max-documents", "30000").code == 0
    res = invoke_cli("render", str(src), env={"DYN_GITOPS_MAX_DOCUMENTS": "40000"})
    assert res.code == 0, res.stderr
    # ... and lowers it: the repository may then not go above the runner's value
    res = invoke_cli("render", str(src), env={"DYN_GITOPS_MAX_DOCUMENTS": "25000"})
    assert_refused(res, 2, "expected at most 25000 (environment DYN_GITOPS_MAX_DOCUMENTS)")


def test_a_settings_file_read_from_git_cannot_raise_a_limit(tmp_path: Path) -> None:
    """render --rev, hydrate and diff read dyn-gitops.yaml from a commit: the same rule."""
    repo = tmp_path / "repo"
    (repo / "deploy").mkdir(parents=True)
    (repo / "deploy" / "dgd.yaml").write_text(DGD)
    env = git_commit(repo)
    settings_file(repo / "deploy", {"max-documents": 30_000})
    git_commit(repo)
    needle = "dyn-gitops.yaml:1: max-documents: found 30000, expected at most"
    for args in (
        ["render", "deploy", "--rev", "HEAD"],
        ["hydrate", "deploy"],
        ["diff", "deploy", "--base", "HEAD~1"],
    ):
        assert_refused(run_cli(*args, cwd=repo, env=env), 2, needle)
    ok = run_cli("render", "deploy", "--rev", "HEAD", "--max-documents", "30000", cwd=repo, env=env)
    assert ok.code == 0, ok.stderr


def test_settings_shows_the_ceiling_of_a_lowered_limit(src: Path) -> None:
    settings_file(src, {"max-depth": 50})
    res = invoke_cli("settings", str(src))
    assert res.code == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if line.startswith("max-depth "))
    assert row.split(None, 2)[1:] == ["50", "dyn-gitops.yaml key max-depth (at most 100: default)"]
    # Argo CD: the Application's env comes after the sidecar's, under its ceiling
    prefixes = ("DYN_GITOPS_", "ARGOCD_ENV_DYN_GITOPS_")
    got = resolve(
        env={"DYN_GITOPS_MAX_DEPTH": "80", "ARGOCD_ENV_DYN_GITOPS_MAX_DEPTH": "60"},
        env_prefixes=prefixes,
    )
    assert got.settings.max_depth == 60
    assert got.origins["max-depth"] == (
        "environment ARGOCD_ENV_DYN_GITOPS_MAX_DEPTH (at most 80: environment DYN_GITOPS_MAX_DEPTH)"
    )


def cmp_generate(app: Path, env: dict[str, str]) -> CliResult:
    return run_cli(
        "cmp", "generate", "--server", "off", cwd=app, env={"ARGOCD_APP_NAMESPACE": "demo", **env}
    )


def parameters(**values: str) -> str:
    return json.dumps([{"name": k.replace("_", "-"), "string": v} for k, v in values.items()])


def test_argo_cd_application_env_and_parameters_cannot_raise_a_limit(src: Path) -> None:
    app_env = {"ARGOCD_ENV_DYN_GITOPS_MAX_DOCUMENTS": "30000"}
    assert_refused(
        cmp_generate(src, app_env),
        2,
        "environment ARGOCD_ENV_DYN_GITOPS_MAX_DOCUMENTS: max-documents: found 30000, "
        "expected at most 20000",
    )
    param = {"ARGOCD_APP_PARAMETERS": parameters(max_replicas="20000")}
    assert_refused(
        cmp_generate(src, param),
        2,
        "parameter max-replicas: max-replicas: found 20000, expected at most 10000 (the default)",
    )
    # the sidecar's own environment is the runner's: it raises the ceiling
    sidecar = {"DYN_GITOPS_MAX_DOCUMENTS": "40000", "DYN_GITOPS_MAX_REPLICAS": "20000"}
    assert cmp_generate(src, {**sidecar, **app_env, **param}).code == 0


def test_argo_cd_application_env_and_parameters_can_lower_a_limit(src: Path) -> None:
    res = cmp_generate(src, {"ARGOCD_ENV_DYN_GITOPS_MAX_OBJECTS": "2"})
    assert_refused(res, 1, "(setting max-objects)")
    res = cmp_generate(src, {"ARGOCD_APP_PARAMETERS": parameters(max_replicas="2")})
    assert_refused(res, 1, "spec.services.VllmWorker.replicas: 3 is more than the 2")


def function_config(**values: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "fn"},
        "data": {k.replace("_", "-"): v for k, v in values.items()},
    }


def test_krm_function_config_cannot_raise_a_limit() -> None:
    stdin = resource_list([yaml.safe_load(DGD)], function_config(max_objects="300000"))
    res = run_cli("krm", stdin=stdin)
    assert res.code == 1, res.stderr
    out = yaml.safe_load(res.stdout)
    errors = [r["message"] for r in out["results"] if r["severity"] == "error"]
    assert len(errors) == 1 and errors[0].startswith(
        "functionConfig max-objects: max-objects: found 300000, expected at most 200000 "
        "(the default)"
    ), errors
    assert out["items"] == [yaml.safe_load(DGD)]  # returned untouched
    # the runner (flag or environment of the function process) raises the ceiling
    assert run_cli("krm", "--max-objects", "300000", stdin=stdin).code == 0
    assert run_cli("krm", stdin=stdin, env={"DYN_GITOPS_MAX_OBJECTS": "300000"}).code == 0


def test_krm_function_config_can_lower_a_limit() -> None:
    stdin = resource_list([yaml.safe_load(DGD)], function_config(max_replicas="2"))
    res = run_cli("krm", stdin=stdin)
    assert res.code == 1, res.stderr
    out = yaml.safe_load(res.stdout)
    assert [(r["field"]["path"], r["message"]) for r in out["results"]] == [
        (
            "spec.services.VllmWorker.replicas",
            "3 is more than the 2 replicas allowed (setting max-replicas)",
        )
    ]


# ----------------------------------------------------------------------------- bounds
@pytest.mark.parametrize(
    ("name", "value", "bound"),
    [
        ("max-objects", "0", LIMIT_MAX),
        ("max-file-bytes", str(LIMIT_MAX + 1), LIMIT_MAX),
        ("max-depth", "0", DEPTH_MAX),
        ("max-depth", str(DEPTH_MAX + 1), DEPTH_MAX),
        ("max-replicas", "-3", None),
        ("max-output-bytes", "9" * 5000, None),
    ],
)
def test_a_runner_limit_out_of_range_is_a_usage_error(
    src: Path, name: str, value: str, bound: int | None
) -> None:
    """Zero would refuse everything and "unlimited" is what a limit exists to prevent; past
    int32 a value is a typo, and max-depth is capped at what the renderer itself survives."""
    res = invoke_cli("render", str(src), f"--{name}", value)
    if bound is None:
        assert_refused(res, 2, name)
    else:
        assert_refused(res, 2, f"{name}: found {value}, expected a limit from 1 to {bound}")
    env = {f"DYN_GITOPS_{name.upper().replace('-', '_')}": value}
    assert_refused(invoke_cli("render", str(src), env=env), 2, name)


def test_every_source_has_a_declared_trust() -> None:
    """A source resolve() does not know cannot slip in as trusted."""
    with pytest.raises(ValueError, match="no trust is declared"):
        resolve(env={"X_MAX_DEPTH": "5"}, env_prefixes=("X_",))


def test_run_wide_alias_budget_follows_the_same_rule() -> None:
    """max-total-yaml-nodes (enforced while reading): the repository may lower, not raise."""
    assert resolve(file_values={"max-total-yaml-nodes": 1000}).settings.max_total_yaml_nodes == 1000
    with pytest.raises(SettingsError, match="expected at most 2000000"):
        resolve(file_values={"max-total-yaml-nodes": 3_000_000})
    raised = resolve(
        file_values={"max-total-yaml-nodes": 3_000_000}, flags={"max-total-yaml-nodes": 4_000_000}
    )
    assert raised.settings.max_total_yaml_nodes == 4_000_000
