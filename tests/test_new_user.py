"""The rough edges a new user hit (issue 16, point 4): one test each.

Each test names the edge it pins; the fix is described in the docs it points to.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import invoke_cli, run_cli
from support.inputs import small_dgd
from support.paths import REPO
from support.rendering import AS_APPLIED_FLAGS


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


# ---------------------------------------------------------------------------- error messages
def test_error_messages_a_new_user_can_act_on(tmp_path: Path) -> None:
    """A missing path says why; ``--rev`` and ``diff`` find the Git repository from the given
    path, not the working directory; ``dyn-gitops-operator`` without its extra or with a bad
    kubeconfig prints one line, no traceback; each command's help offers only the settings
    it uses; one file is "1 file"."""
    # a missing path: what is missing, relative to where
    missing = run_cli("render", "deploy/app", cwd=tmp_path)
    assert missing.code == 2 and missing.stdout == ""
    assert "deploy/app: no such file or directory" in missing.stderr
    assert str(tmp_path) in missing.stderr

    # a repository elsewhere than the working directory
    repo = tmp_path / "repo"
    (repo / "deploy").mkdir(parents=True)
    (repo / "deploy" / "dgd.yaml").write_text(small_dgd("one"), encoding="utf-8")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    at_rev = run_cli(
        "render", *AS_APPLIED_FLAGS, "--rev", "HEAD", str(repo / "deploy"), cwd=elsewhere
    )
    assert at_rev.code == 0, at_rev.stderr
    assert {o["metadata"]["name"] for o in _objects(at_rev.stdout) if o["kind"] == "Deployment"}
    diff = run_cli("diff", *AS_APPLIED_FLAGS, "--base", "HEAD", str(repo / "deploy"), cwd=elsewhere)
    assert diff.code == 0, diff.stderr
    assert "no differences" in diff.stdout
    nowhere = run_cli("render", "--rev", "HEAD", str(elsewhere), cwd=elsewhere)
    assert nowhere.code == 2 and "not inside a Git repository" in nowhere.stderr

    # "1 file", "1 DynamoGraphDeployment"
    one = run_cli("validate", *AS_APPLIED_FLAGS, str(repo / "deploy"))
    assert one.code == 0, one.stderr
    assert "1 file, 1 DynamoGraphDeployment, " in one.stderr
    assert "1 files" not in one.stderr

    # help: only the settings a command uses
    render_help = run_cli("render", "--help").stdout
    assert "--output-format" in render_help and "--max-output-bytes" in render_help
    validate_help = run_cli("validate", "--help").stdout
    assert "--output-format" not in validate_help and "--max-output-bytes" not in validate_help
    assert "--namespace" in validate_help
    diff_help = run_cli("diff", "--help").stdout
    assert "--allow-empty" not in diff_help and "--output-format" not in diff_help
    refused = run_cli("diff", "--base", "HEAD", "--output-format", "json", str(repo))
    assert refused.code == 2 and "No such option" in refused.stderr

    # the controller: a bad kubeconfig, then without its extra
    def operator(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
        code = f"{prelude}import sys; from dyn_gitops_operator.__main__ import main; "
        code += "sys.exit(main(sys.argv[1:]))"
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )

    (tmp_path / "broken.kubeconfig").write_text("clusters: [\n", encoding="utf-8")
    for kubeconfig, why in (
        ("absent.kubeconfig", "no such file"),
        ("broken.kubeconfig", "not YAML"),
    ):
        res = operator("--kubeconfig", kubeconfig, "--log-format", "plain")
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr
        assert f"cannot load the kubeconfig {kubeconfig}" in res.stderr or (
            f"cannot load the kubeconfig ({kubeconfig})" in res.stderr
        )
        assert why in res.stderr
    no_extra = operator(prelude="import sys; sys.modules['kubernetes'] = None; ")
    assert no_extra.returncode == 2 and "Traceback" not in no_extra.stderr
    assert "pip install 'dyn-gitops[operator]'" in no_extra.stderr


# ------------------------------------------------------------- Helm post-renderer, namespace
HELM_CHART = REPO / "tests" / "data" / "workflows" / "chart"
HELM_PLUGIN = REPO / "charts" / "helm-plugin"


def _namespaces(text: str) -> set[str]:
    return {o["metadata"].get("namespace", "") for o in _objects(text) if o["kind"] != "ConfigMap"}


@pytest.mark.realk8s
def test_the_post_renderer_never_puts_a_release_into_default(
    test_binaries: Any, tmp_path: Path
) -> None:
    """``helm template -n prod ... --post-renderer dyn-gitops`` (the Helm 4 plugin) must not
    put objects in ``default``: Helm tells a post-renderer no namespace (not even
    HELM_NAMESPACE to a Helm 4 plugin), so a graph without its own namespace is refused
    with how to give it; given as a post-renderer arg, or set by the template
    (``{{ .Release.Namespace }}``), everything lands in the release namespace."""
    binary = test_binaries("helm")["helm"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DYN_GITOPS_", "HELM_"))}
    env.update(
        HELM_CONFIG_HOME=str(tmp_path / "config"),
        HELM_DATA_HOME=str(tmp_path / "data"),
        HELM_CACHE_HOME=str(tmp_path / "cache"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )

    def helm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binary), *args], capture_output=True, text=True, env=env, timeout=120
        )

    assert helm("plugin", "install", str(HELM_PLUGIN)).returncode == 0
    chart = tmp_path / "chart"
    shutil.copytree(HELM_CHART, chart)

    # why there is no reliable way: a post-renderer plugin is told no namespace at all
    spy = tmp_path / "spy"
    spy.mkdir()
    (spy / "plugin.yaml").write_text(
        "apiVersion: v1\ntype: postrenderer/v1\nname: spy\nversion: 0.1.0\n"
        "runtime: subprocess\nruntimeConfig:\n  platformCommand:\n    - command: sh\n"
        f"      args: [-c, 'env > {tmp_path}/spy.env; echo \"$@\" >> {tmp_path}/spy.env; cat', x]\n"
    )
    assert helm("plugin", "install", str(spy)).returncode == 0
    spied = helm("template", "rel", str(chart), "-n", "prod", "--post-renderer", "spy")
    assert spied.returncode == 0, spied.stderr
    told = (tmp_path / "spy.env").read_text()
    assert "prod" not in told and "HELM_NAMESPACE" not in told, told

    refused = helm("template", "rel", str(chart), "-n", "prod", "--post-renderer", "dyn-gitops")
    assert refused.returncode != 0 and refused.stdout == ""
    # Helm 4 drops a plugin's stderr; the same stream through the CLI shows why
    plain = helm("template", "rel", str(chart), "-n", "prod").stdout
    why = run_cli("post-render", stdin=plain)
    assert why.code == 2 and why.stdout == ""
    assert "DynamoGraphDeployment/rel-agg sets no metadata.namespace" in why.stderr
    assert "--post-renderer-args --namespace=" in why.stderr

    given = helm(
        "template",
        "rel",
        str(chart),
        "-n",
        "prod",
        "--post-renderer",
        "dyn-gitops",
        "--post-renderer-args",
        "--namespace=prod",
    )
    assert given.returncode == 0, given.stderr
    assert _namespaces(given.stdout) == {"prod"}

    dgd = chart / "templates" / "dgd.yaml"
    dgd.write_text(
        dgd.read_text().replace(
            "  name: {{ .Release.Name }}-agg\n",
            "  name: {{ .Release.Name }}-agg\n  namespace: {{ .Release.Namespace }}\n",
        )
    )
    own = helm("template", "rel", str(chart), "-n", "prod", "--post-renderer", "dyn-gitops")
    assert own.returncode == 0, own.stderr
    assert _namespaces(own.stdout) == {"prod"}


# ---------------------------------------------------------- objects shared by a namespace
def test_namespace_shared_objects_have_exactly_one_owner(tmp_path: Path) -> None:
    """Two Argo CD Applications (apps a and b) in one namespace both rendered
    ``planner-serviceaccount`` and its RoleBinding. With the documented pattern
    (docs/argocd.md: ``namespace-shared: omit`` in each app, an owner Application on the
    parent folder with the parameter ``namespace-shared=only``), each shared object is
    rendered by exactly one Application, and every other object by its app only."""
    team = tmp_path / "team"
    for app in ("a", "b"):
        (team / app).mkdir(parents=True)
        (team / app / "dgd.yaml").write_text(small_dgd(f"graph-{app}"), encoding="utf-8")
        (team / app / "dyn-gitops.yaml").write_text("namespace-shared: omit\n", encoding="utf-8")

    def ids(path: Path, *flags: str) -> set[tuple[str, str]]:
        res = invoke_cli("render", *AS_APPLIED_FLAGS, "--namespace", "team", *flags, str(path))
        assert res.code == 0, res.stderr
        return {(o["kind"], o["metadata"]["name"]) for o in _objects(res.stdout)}

    # before: each app alone renders them (the default), so both Applications own them
    before = [ids(team / app, "--namespace-shared", "emit") for app in ("a", "b")]
    shared = {
        ("ServiceAccount", "planner-serviceaccount"),
        ("RoleBinding", "planner-serviceaccount-binding"),
    }
    assert all(shared <= b for b in before)

    apps = [ids(team / app) for app in ("a", "b")]
    # the owner, as Argo CD runs it: the Application's parameter over dyn-gitops.yaml
    owner_res = run_cli(
        "cmp",
        "generate",
        "--server",
        "off",
        cwd=team,
        env={
            "ARGOCD_APP_NAME": "team-shared",
            "ARGOCD_APP_NAMESPACE": "team",
            "ARGOCD_APP_PARAMETERS": json.dumps(
                [
                    {"name": "namespace-shared", "string": "only"},
                    {"name": "runtime-version-admission", "string": "lenient"},
                    {"name": "origin-version", "string": "none"},
                ]
            ),
        },
    )
    assert owner_res.code == 0, owner_res.stderr
    owner = {(o["kind"], o["metadata"]["name"]) for o in _objects(owner_res.stdout)}
    assert owner == shared
    every = [*apps, owner]
    for obj in set().union(*every):
        assert sum(obj in s for s in every) == 1, obj
    assert apps[0] & before[0] == before[0] - shared


# -------------------------------------------------------------- Dynamo kinds not expanded
def test_dynamo_kinds_not_expanded_are_refused_with_the_gitops_workflow(tmp_path: Path) -> None:
    """DynamoGraphDeploymentRequest, DynamoCheckpoint (and an enabled checkpoint with
    checkpointRef) and the old API's DynamoComponent are refused on purpose, each at its
    place, with what happens in a cluster managed by dyn-gitops and the workflow to use
    (docs/reference-behaviour.md, "Dynamo kinds not rendered"); nothing is printed."""
    cases = {
        "DynamoGraphDeploymentRequest": (
            "nvidia.com/v1beta1",
            {"model": "Qwen/Qwen3-0.6B", "backend": "vllm"},
            ["nothing profiles it", "commit that DGD"],
        ),
        "DynamoCheckpoint": (
            "nvidia.com/v1alpha1",
            {"identity": {"model": "m"}},
            ["removed in Dynamo 1.5", "Remove it from Git"],
        ),
        "DynamoComponent": (
            "nvidia.com/v1alpha1",
            {"dynamoComponent": "old:tag"},
            ["old Dynamo API", "DynamoGraphDeployment (spec.services"],
        ),
    }
    for kind, (api, spec, says) in cases.items():
        src = tmp_path / kind
        src.mkdir()
        (src / "dgd.yaml").write_text(small_dgd("ok"), encoding="utf-8")
        obj = {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, "spec": spec}
        (src / "other.yaml").write_text(yaml.safe_dump(obj), encoding="utf-8")
        res = invoke_cli("render", *AS_APPLIED_FLAGS, str(src))
        assert res.code == 1 and res.stdout == "", kind
        assert f"other.yaml:2: {kind}/x: kind: " in res.stderr, res.stderr
        for text in says:
            assert text in res.stderr, (kind, text)

    restore = small_dgd("restored").replace(
        "      componentType: worker\n",
        "      componentType: worker\n      checkpoint:\n        enabled: true\n"
        "        checkpointRef: qwen-snap\n",
    )
    (tmp_path / "restore").mkdir()
    (tmp_path / "restore" / "dgd.yaml").write_text(restore, encoding="utf-8")
    res = invoke_cli("render", *AS_APPLIED_FLAGS, str(tmp_path / "restore"))
    assert res.code == 1 and res.stdout == ""
    assert "checkpoint.checkpointRef: restoring from the PodSnapshot 'qwen-snap'" in res.stderr
    assert "the pods start cold" in res.stderr


# ------------------------------------------------------------- docs that disagree with code
def test_the_docs_agree_with_the_code() -> None:
    """One Argo CD version everywhere (the argocd-cmp-server the tests run); the KRM sample
    says both kustomize flags wherever it is run; docs/operator.md's flag table has the
    controller's defaults; README's counts and build figures are the measured ones."""
    import re

    versions = dict(
        line.split("=", 1)
        for line in (REPO / "tools" / "test-bins" / "versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    argocd = versions["argocd-cmp-server"]
    pins: dict[str, set[str]] = {}
    for path in [
        *(REPO / "deploy").rglob("*.yaml"),
        *(REPO / "tests" / "data" / "argocd").rglob("*.yaml"),
        *(REPO / "docs").glob("*.md"),
        REPO / "README.md",
    ]:
        text = path.read_text(encoding="utf-8")
        found = re.findall(
            r"argoproj/argo-cd/(v\d+\.\d+\.\d+)|argoproj/argocd:(v\d+\.\d+\.\d+)", text
        )
        for pair in found:
            pins.setdefault("".join(pair), set()).add(str(path.relative_to(REPO)))
    assert set(pins) == {argocd}, pins

    for path in [
        *(REPO / "docs").glob("*.md"),
        *(REPO / "samples").rglob("*.yaml"),
        REPO / "README.md",
    ]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "samples/kustomize-krm" in line and re.search(
                r"kustomize build|kubectl kustomize", line
            ):
                assert "--enable-exec" in line and "--enable-alpha-plugins" in line, (path, line)

    from dyn_gitops_operator.__main__ import parser

    defaults = {a.dest: a.default for a in parser()._actions}
    table = (REPO / "docs" / "operator.md").read_text(encoding="utf-8")
    for flag, dest in (("--workers", "workers"), ("--resync-period", "resync_period")):
        row = re.search(rf"^\| `{flag}` \| ([^|]+) \|", table, re.MULTILINE)
        assert row is not None, flag
        assert float(row.group(1).strip()) == float(defaults[dest]), flag

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    fake = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:randomly",
            *sorted(str(p) for p in (REPO / "tests").glob("test_operator_reconcilers_fake_*.py")),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    count = re.search(r"(\d+) tests? collected", fake.stdout)
    assert count is not None, fake.stdout + fake.stderr
    assert f"`tests/test_operator_reconcilers_fake_*.py`, {count.group(1)} tests" in readme
    bins = (REPO / "docs" / "test-bins.md").read_text(encoding="utf-8")
    assert "1,534 CPU-s" in bins and "1,534 CPU-seconds" in readme
    quick = readme.split("## Quick start", 1)[1].split("```bash", 1)[1]
    first = next(ln for ln in quick.splitlines() if ln.strip() and not ln.startswith("#"))
    assert first.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install ."), first


# ----------------------------------------------------------------- README quick start
def test_the_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    """The first command of the README's quick start, exactly as written, in a copy of the
    repository: it makes its own virtualenv (a stock Debian 12 / Ubuntu 24.04 Python
    refuses ``pip install`` outside one, PEP 668), installs from PyPI and renders the sample."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    first = next(ln for ln in quick.splitlines() if ln.strip() and not ln.startswith("#"))
    copy = tmp_path / "dyn-gitops"
    shutil.copytree(
        REPO,
        copy,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "__pycache__",
            "*.egg-info",
            "build",
            ".mypy_cache",
            ".ruff_cache",
            ".pytest_cache",
            ".hypothesis",
        ),
    )
    python_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DYN_GITOPS_", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{python_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    if not (python_dir / "python3").exists():
        pytest.skip(f"no python3 beside {sys.executable}")
    proc = subprocess.run(
        ["bash", "-c", first], cwd=copy, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rendered = proc.stdout[proc.stdout.index("\n---\n") + 1 :]  # after pip's own output
    kinds = {o["kind"] for o in _objects(rendered)}
    assert {"Deployment", "Service", "DynamoGraphDeployment"} <= kinds
    assert (copy / ".venv" / "bin" / "dyn-gitops").exists()


# ------------------------------------------------------------------------------ explain
def test_explain_shows_where_each_item_of_the_pod_comes_from() -> None:
    """``dyn-gitops explain DGD SERVICE [PATH]`` (the product spec's ``explain``): every env
    var, envFrom, port, probe, volume mount and volume of the rendered pod, each traced to
    the DGD field that wrote it (file:line and path, the winning one when several set it),
    the render setting that injects it, or the operator's default for its type."""

    def rows(*args: str) -> dict[tuple[str, str], str]:
        res = invoke_cli("explain", *AS_APPLIED_FLAGS, *args)
        assert res.code == 0, res.stderr
        out = {}
        for line in res.stdout.splitlines():
            parts = line.split()
            items = ("env", "port", "probe", "volumeMount", "volume")
            if len(parts) >= 4 and parts[1] in items:  # CONTAINER ITEM NAME FROM
                out[(parts[1], parts[2])] = " ".join(parts[3:])
        return out

    envs = rows("vllm-envs", "Frontend", str(REPO / "samples" / "graph-envs" / "input"))
    assert envs[("env", "DYN_LOG")] == "vllm-graph-envs.yaml:24 spec.services.Frontend.envs[0]"
    assert envs[("env", "LOG_FORMAT")] == "vllm-graph-envs.yaml:12 spec.envs[1]"
    assert envs[("env", "POD_NAME")] == "operator default (frontend)"
    # every env var of the rendered pod is listed
    rendered = invoke_cli(
        "render", *AS_APPLIED_FLAGS, str(REPO / "samples" / "graph-envs" / "input")
    )
    (frontend,) = [
        o
        for o in _objects(rendered.stdout)
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm-envs-frontend"
    ]
    main = frontend["spec"]["template"]["spec"]["containers"][0]
    assert {n for (what, n) in envs if what == "env"} == {e["name"] for e in main["env"]}

    probes = rows(
        "vllm-probes", "VllmDecodeWorker", str(REPO / "samples" / "user-probes" / "input")
    )
    assert probes[("probe", "startupProbe")].endswith(
        "spec.services.VllmDecodeWorker.extraPodSpec.mainContainer.startupProbe"
    )
    assert probes[("probe", "livenessProbe")].endswith(
        "spec.services.VllmDecodeWorker.livenessProbe"
    )
    pvc = rows(
        "vllm-pvc",
        "VllmWorker",
        str(REPO / "samples" / "pvc-cache" / "input"),
        "--nats-address",
        "nats://nats.example:4222",
    )
    assert pvc[("volume", "model-cache")] == "vllm-pvc-cache.yaml:10 spec.pvcs[0]"
    assert pvc[("volumeMount", "model-cache:/opt/models")].endswith("VllmWorker.volumeMounts[0]")
    assert pvc[("env", "NATS_SERVER")] == "setting nats-address"
    assert pvc[("volume", "shared-memory")] == "operator default (worker)"

    missing = invoke_cli("explain", "nope", "X", str(REPO / "samples" / "pvc-cache" / "input"))
    assert missing.code == 2 and "no DynamoGraphDeployment named 'nope'" in missing.stderr
    assert "(found: vllm-pvc)" in missing.stderr
