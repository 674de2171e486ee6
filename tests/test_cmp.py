"""``dyn-gitops cmp generate`` under the Argo CD plugin environment (no Argo CD needed).

Each test runs the real entry point in a subprocess with the variables repo-server would
set, in the application directory, as argocd-cmp-server does. The warm render server is
tested the same way, including the tiny launcher the sidecar image installs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliResult, run_cli
from support.render_server import exited, short_tmpdir, wait_for_server

from dyn_gitops import __version__, keys
from dyn_gitops.argocd import apicheck, cmpenv

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "vllm-agg" / "input"


def generate(app: Path, env: dict[str, str] | None = None, *extra: str) -> CliResult:
    return run_cli(
        "cmp", "generate", *extra, cwd=app, env={"TMPDIR": "/nonexistent", **(env or {})}
    )


def objects(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """The vllm-agg sample without its dyn-gitops.yaml (so nothing sets the namespace)."""
    d = tmp_path / "app"
    d.mkdir()
    shutil.copy(SAMPLE / "vllm-agg.yaml", d)
    return d


def params(**values: Any) -> str:
    return json.dumps([{"name": k.replace("_", "-"), **v} for k, v in values.items()])


# --- the environment ----------------------------------------------------------------------
def test_destination_namespace_is_the_default_namespace(app: Path) -> None:
    res = generate(app, {"ARGOCD_APP_NAMESPACE": "team-a"}, "--server", "off")
    assert res.code == 0, res.stderr
    assert {o["metadata"].get("namespace") for o in objects(res.stdout)} == {"team-a"}
    # exactly what the CLI prints with the same namespace
    assert res.stdout == run_cli("render", str(app), "--namespace", "team-a").stdout


def test_precedence_file_env_appenv_parameter(app: Path) -> None:
    """default < dyn-gitops.yaml < sidecar env < ARGOCD_ENV_* < parameters (documented)."""
    base = {"ARGOCD_APP_NAMESPACE": "dest"}
    layers = [
        ({}, "dest"),
        ({"__file__": "namespace: from-file\n"}, "from-file"),
        ({"DYN_GITOPS_NAMESPACE": "from-sidecar"}, "from-sidecar"),
        ({"ARGOCD_ENV_DYN_GITOPS_NAMESPACE": "from-app-env"}, "from-app-env"),
        ({"ARGOCD_APP_PARAMETERS": params(namespace={"string": "from-param"})}, "from-param"),
    ]
    env = dict(base)
    for layer, expected in layers:
        if "__file__" in layer:
            (app / "dyn-gitops.yaml").write_text(layer["__file__"])
        else:
            env.update(layer)
        res = generate(app, env, "--server", "off")
        assert res.code == 0, res.stderr
        assert {o["metadata"]["namespace"] for o in objects(res.stdout)} == {expected}


def test_settings_change_the_output_as_the_cli_flags_do(app: Path) -> None:
    env = {
        "ARGOCD_ENV_DYN_GITOPS_DISCOVERY_BACKEND": "etcd",
        "ARGOCD_APP_PARAMETERS": params(emit_source={"string": "false"}),
    }
    res = generate(app, env, "--server", "off")
    assert res.code == 0, res.stderr
    ref = run_cli("render", str(app), "--discovery-backend", "etcd", "--no-emit-source")
    assert res.stdout == ref.stdout
    assert "DynamoGraphDeployment" not in {o["kind"] for o in objects(res.stdout)}


def test_source_api_version_parameter(app: Path) -> None:
    """The source DGD is emitted in v1beta1 by default; the parameter source-api-version
    gives what the CLI flag gives (v1alpha1 for clusters whose CRDs serve only that)."""
    res = generate(app, {}, "--server", "off")
    assert res.code == 0, res.stderr
    [dgd] = [o for o in objects(res.stdout) if o["kind"] == "DynamoGraphDeployment"]
    assert dgd["apiVersion"] == "nvidia.com/v1beta1" and "components" in dgd["spec"]
    env = {"ARGOCD_APP_PARAMETERS": params(source_api_version={"string": "v1alpha1"})}
    res = generate(app, env, "--server", "off")
    assert res.code == 0, res.stderr
    ref = run_cli("render", str(app), "--source-api-version", "v1alpha1")
    assert res.stdout == ref.stdout
    [dgd] = [o for o in objects(res.stdout) if o["kind"] == "DynamoGraphDeployment"]
    assert dgd["apiVersion"] == "nvidia.com/v1alpha1" and "services" in dgd["spec"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"ARGOCD_ENV_DYN_GITOPS_LWS": "maybe"},
            "environment ARGOCD_ENV_DYN_GITOPS_LWS: lws: found 'maybe', expected true or false",
        ),
        (
            {"ARGOCD_ENV_DYN_GITOPS_NAMESPCE": "x"},
            "environment ARGOCD_ENV_DYN_GITOPS_NAMESPCE: unknown setting 'namespce' (did you mean "
            "'namespace'?)",
        ),
        (
            {"ARGOCD_ENV_NAMESPACE": "x"},
            "environment ARGOCD_ENV_NAMESPACE: not read: name the plugin env entry "
            "DYN_GITOPS_NAMESPACE",
        ),
        (
            {"ARGOCD_APP_PARAMETERS": params(discovery_backend={"string": "zookeeper"})},
            "parameter discovery-backend: discovery-backend: found 'zookeeper', expected one of "
            "kubernetes, etcd",
        ),
        (
            {"ARGOCD_APP_PARAMETERS": params(lws={"array": ["true"]})},
            "parameter lws: takes a single value (string), found an array",
        ),
        (
            {"ARGOCD_APP_PARAMETERS": params(grove={"map": {"a": "b"}})},
            "parameter grove: takes a single value (string), found a map",
        ),
        ({"ARGOCD_APP_PARAMETERS": "[{"}, "ARGOCD_APP_PARAMETERS: not valid JSON"),
        (
            {"ARGOCD_APP_PARAMETERS": params(ingres_class={"string": "nginx"})},
            "unknown setting 'ingres-class' (did you mean 'ingress-class'?)",
        ),
    ],
)
def test_bad_settings_are_rejected_with_a_clear_error(
    app: Path, env: dict[str, str], expected: str
) -> None:
    res = generate(app, env, "--server", "off")
    assert res.code == 2
    assert res.stdout == ""
    assert expected in res.stderr
    assert "Traceback" not in res.stderr


def test_every_environment_problem_in_one_run(app: Path) -> None:
    res = generate(
        app,
        {
            "ARGOCD_ENV_NAMESPACE": "x",
            "ARGOCD_ENV_DYN_GITOPS_LWS": "maybe",
            "ARGOCD_APP_PARAMETERS": params(lws={"array": []}),
        },
        "--server",
        "off",
    )
    assert res.code == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 3, res.stderr


def test_parameters_null_and_unset_values() -> None:
    problems: list[str] = []
    assert cmpenv.parse_parameters("null", problems) == {}
    assert cmpenv.parse_parameters("", problems) == {}
    assert cmpenv.parse_parameters('[{"name": "lws"}]', problems) == {}  # no value: unset
    assert cmpenv.parse_parameters('[{"name": "lws", "string": "true"}]', problems) == {
        "lws": "true"
    }
    assert problems == []
    cmpenv.parse_parameters(
        '[{"name": "lws", "string": "1"}, {"name": "lws", "string": "0"}]', problems
    )
    assert problems == ["parameter lws: given twice"]


def test_reserved_sidecar_variables_are_not_settings(app: Path) -> None:
    res = generate(app, {"DYN_GITOPS_DEBUG": "1"}, "--server", "off")
    assert res.code == 0, res.stderr


# --- provenance ---------------------------------------------------------------------------
def test_revision_and_source_path_in_provenance(app: Path) -> None:
    (app / "extra.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\n  namespace: ns\ndata:\n  a: b\n"
    )
    sha = "0123456789abcdef0123456789abcdef01234567"
    res = generate(
        app,
        {
            "ARGOCD_APP_REVISION": sha,
            "ARGOCD_APP_SOURCE_PATH": "apps/llm/",
            "ARGOCD_APP_NAMESPACE": "ns",
        },
        "--server",
        "off",
    )
    assert res.code == 0, res.stderr
    for obj in objects(res.stdout):
        ann = obj["metadata"].get("annotations") or {}
        if obj["metadata"]["name"] == "mine":  # pass-through objects stay as written
            assert not any(k.startswith(keys.OUR_PREFIX) for k in ann)
            continue
        assert ann[keys.ANN_SOURCE_COMMIT] == sha
        assert ann[keys.ANN_SOURCE_ROOT] == "apps/llm"
        assert ann[keys.ANN_SOURCE_PATH] == "vllm-agg.yaml"
        assert list(ann) == sorted(ann)


# --- errors and refusals ------------------------------------------------------------------
def test_invalid_dgd_fails_with_file_and_line(app: Path) -> None:
    (app / "broken.yaml").write_text(
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata:\n"
        "  name: broken\nspec:\n  services:\n    Frontend:\n      componentType: frontend\n"
        "      replicas: many\n"
    )
    res = generate(app, {}, "--server", "off")
    assert res.code == 1 and res.stdout == ""
    assert (
        "broken.yaml:9: DynamoGraphDeployment/broken: spec.services.Frontend.replicas:"
        in res.stderr
    )


def test_empty_application_is_refused(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("nothing to render\n")
    res = generate(tmp_path, {}, "--server", "off")
    assert res.code == 1 and res.stdout == ""
    assert "refusing empty output" in res.stderr
    allowed = generate(
        tmp_path,
        {"ARGOCD_APP_PARAMETERS": params(allow_empty={"string": "true"})},
        "--server",
        "off",
    )
    assert allowed.code == 0 and allowed.stdout == ""  # only when explicitly allowed


# --- the destination cluster's APIs -------------------------------------------------------
CORE = (
    "v1,v1/ConfigMap,v1/Service,v1/ServiceAccount,v1/PersistentVolumeClaim,apps/v1,"
    "apps/v1/Deployment,rbac.authorization.k8s.io/v1,rbac.authorization.k8s.io/v1/Role,"
    "rbac.authorization.k8s.io/v1/RoleBinding"
)
#: as a cluster with our CRDs serves them: the DGD in v1beta1 (what is emitted), the DGDSA
#: in v1alpha1
DYNAMO = (
    "nvidia.com/v1beta1,nvidia.com/v1beta1/DynamoGraphDeployment,"
    "nvidia.com/v1alpha1,nvidia.com/v1alpha1/DynamoGraphDeploymentScalingAdapter"
)


def test_api_versions_served(app: Path) -> None:
    res = generate(
        app, {"KUBE_API_VERSIONS": f"{CORE},{DYNAMO}", "KUBE_VERSION": "1.31.2"}, "--server", "off"
    )
    assert res.code == 0, res.stderr


def test_missing_api_is_a_clear_error(app: Path) -> None:
    res = generate(app, {"KUBE_API_VERSIONS": CORE, "KUBE_VERSION": "1.31.2"}, "--server", "off")
    assert res.code == 1 and res.stdout == ""
    assert (
        "vllm-agg.yaml: DynamoGraphDeployment default/vllm-agg: renders "
        "DynamoGraphDeployment vllm-agg (nvidia.com/v1beta1), which the destination "
        "cluster does not serve (KUBE_API_VERSIONS): install the Dynamo CRDs"
    ) in res.stderr


def test_crd_in_the_same_output_counts_as_served(app: Path) -> None:
    crds = run_cli("crds")
    assert crds.code == 0
    (app / "crds.yaml").write_text(crds.stdout)
    res = generate(app, {"KUBE_API_VERSIONS": CORE + ",apiextensions.k8s.io/v1"}, "--server", "off")
    assert res.code == 0, res.stderr


def test_leaderworkerset_needs_its_api() -> None:
    """LWS output (multinode) against a cluster without LeaderWorkerSet."""
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": "g-worker",
            "namespace": "ns",
            "annotations": {
                keys.ANN_RENDERER_VERSION: __version__,
                keys.ANN_SOURCE_PATH: "g.yaml",
                keys.ANN_SOURCE_DGD: "ns/g",
            },
        },
    }
    problems = apicheck.check([lws], kube_version="1.31", api_versions=CORE)
    assert problems == [
        "g.yaml: DynamoGraphDeployment ns/g: renders LeaderWorkerSet g-worker "
        "(leaderworkerset.x-k8s.io/v1), which the destination cluster does not serve "
        "(KUBE_API_VERSIONS): install LeaderWorkerSet, or set the setting lws to false"
    ]
    served = CORE + ",leaderworkerset.x-k8s.io/v1,leaderworkerset.x-k8s.io/v1/LeaderWorkerSet"
    assert apicheck.check([lws], kube_version="1.31", api_versions=served) == []
    assert apicheck.check([lws], kube_version="", api_versions="") == []  # not under Argo CD


@pytest.mark.parametrize(
    ("api_version", "kind", "hint"),
    [
        ("grove.io/v1alpha1", "PodCliqueSet", "install Grove, or set the setting grove to false"),
        (
            "scheduling.volcano.sh/v1beta1",
            "PodGroup",
            "install Volcano (LeaderWorkerSet gangs), or set the setting lws to false",
        ),
        (
            "resource.k8s.io/v1",
            "ResourceClaimTemplate",
            "DRA needs resource.k8s.io/v1 "
            "(Kubernetes 1.34+) and a GPU DRA driver; or set the setting dra to false",
        ),
    ],
)
def test_grove_volcano_and_dra_outputs_need_their_apis(
    api_version: str, kind: str, hint: str
) -> None:
    obj = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "g",
            "namespace": "ns",
            "annotations": {
                keys.ANN_RENDERER_VERSION: __version__,
                keys.ANN_SOURCE_PATH: "g.yaml",
                keys.ANN_SOURCE_DGD: "ns/g",
            },
        },
    }
    (problem,) = apicheck.check([obj], kube_version="1.34", api_versions=CORE)
    assert problem.endswith(f"(KUBE_API_VERSIONS): {hint}"), problem
    served = f"{CORE},{api_version},{api_version}/{kind}"
    assert apicheck.check([obj], kube_version="1.34", api_versions=served) == []


def test_kube_version_too_old_for_native_sidecars(app: Path) -> None:
    text = (SAMPLE / "vllm-agg.yaml").read_text()
    frontend = (
        "      extraPodSpec:\n        mainContainer:\n          image: nvcr.io/nvidia/ai-"
        "dynamo/vllm-runtime:1.1.0\n    VllmDecodeWorker:"
    )
    assert frontend in text
    (app / "vllm-agg.yaml").write_text(
        text.replace(
            frontend,
            frontend.replace(
                "      extraPodSpec:\n",
                "      extraPodSpec:\n        initContainers:\n"
                "        - name: proxy\n          image: envoy:v1\n"
                "          restartPolicy: Always\n",
            ),
        )
    )
    old = generate(app, {"KUBE_VERSION": "v1.28.9-eks-abc"}, "--server", "off")
    assert old.code == 1 and old.stdout == ""
    assert (
        "Deployment vllm-agg-frontend uses native sidecar containers "
        "(initContainers[].restartPolicy: Always), which needs Kubernetes 1.29 or newer; "
        "the destination cluster runs v1.28.9-eks-abc"
    ) in old.stderr
    assert generate(app, {"KUBE_VERSION": "1.29.0"}, "--server", "off").code == 0


def test_api_versions_parsing() -> None:
    gvs, kinds = apicheck.parse_api_versions(" v1, v1/Pod ,apps/v1/Deployment,batch/v1,")
    assert gvs == {"v1", "apps/v1", "batch/v1"}
    assert kinds == {"v1": {"Pod"}, "apps/v1": {"Deployment"}}
    assert apicheck.parse_kube_version("1.31.2") == (1, 31)
    assert apicheck.parse_kube_version("v1.29.3-eks-1") == (1, 29)
    assert apicheck.parse_kube_version("garbage") is None


# --- the warm render server ---------------------------------------------------------------
@pytest.fixture
def short_tmp() -> Iterator[Path]:
    with short_tmpdir("dgc") as d:
        yield d


def test_warm_server_answers_exactly_as_in_process(app: Path, short_tmp: Path) -> None:
    env = {
        "TMPDIR": str(short_tmp),
        "ARGOCD_APP_NAME": "llm",
        "ARGOCD_APP_NAMESPACE": "ns",
        "ARGOCD_APP_REVISION": "abc",
        "ARGOCD_APP_SOURCE_PATH": "apps/llm",
    }
    first = generate(app, env)  # no server yet: in-process, and one is started
    assert first.code == 0, first.stderr
    assert "(in-process)" in first.stderr
    wait_for_server(short_tmp)
    warm = generate(app, env)
    assert warm.code == 0, warm.stderr
    assert "(warm server)" in warm.stderr
    assert warm.stdout == first.stdout
    # errors come back the same way: exit code, file:line on stderr, nothing on stdout
    (app / "broken.yaml").write_text(
        "apiVersion: nvidia.com/v1alpha1\nkind: "
        "DynamoGraphDeployment\nmetadata: {name: b}\nspec: 3\n"
    )
    bad = generate(app, env)
    assert bad.code == 1 and bad.stdout == ""
    assert "broken.yaml:4: DynamoGraphDeployment/b: spec:" in bad.stderr
    bad_env = generate(app, {**env, "ARGOCD_ENV_DYN_GITOPS_GROVE": "perhaps"})
    assert bad_env.code == 2 and "ARGOCD_ENV_DYN_GITOPS_GROVE" in bad_env.stderr


def test_launcher_and_concurrent_requests(app: Path, short_tmp: Path, tmp_path: Path) -> None:
    launcher = tmp_path / "bin" / "dyn-gitops"
    launcher.parent.mkdir()
    assert run_cli("cmp", "install-launcher", str(launcher)).code == 0
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")},
        "TMPDIR": str(short_tmp),
        "ARGOCD_APP_NAME": "llm",
        "ARGOCD_APP_NAMESPACE": "ns",
    }

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(launcher), "cmp", "generate"],
            cwd=app,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    cold = run()  # in-process through the full CLI, and a server is started
    assert cold.returncode == 0, cold.stderr
    wait_for_server(short_tmp)
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: run(), range(12)))
    for res in results:
        assert res.returncode == 0, res.stderr
        assert res.stdout == cold.stdout
        assert "(warm server)" in res.stderr


def test_server_stops_when_its_socket_is_removed(app: Path, short_tmp: Path) -> None:
    env = {"TMPDIR": str(short_tmp), "ARGOCD_APP_NAME": "llm"}
    assert generate(app, env).code == 0
    sock = wait_for_server(short_tmp)
    pid = int(sock.with_suffix(".sock.pid").read_text())
    sock.unlink()
    assert exited(pid), "the server did not stop"
    res = generate(app, {"TMPDIR": str(short_tmp)})  # no server: still answers, in-process
    assert res.code == 0 and "(in-process)" in res.stderr


def test_no_server_outside_argo_cd(app: Path, short_tmp: Path) -> None:
    """Without ARGOCD_APP_NAME (a person at a shell) nothing is left running."""
    res = generate(app, {"TMPDIR": str(short_tmp)})
    assert res.code == 0, res.stderr
    time.sleep(0.5)
    assert not list(short_tmp.glob("dyn-gitops-*/*.sock"))


def test_untrusted_socket_directory_is_not_used(app: Path, short_tmp: Path) -> None:
    d = short_tmp / f"dyn-gitops-{os.getuid()}"
    d.mkdir(mode=0o777)
    d.chmod(0o777)  # writable by others: a server there could be anyone's
    res = generate(app, {"TMPDIR": str(short_tmp)})
    assert res.code == 0 and "(in-process)" in res.stderr


def test_cli_start_up_imports_no_renderer() -> None:
    """Registering the cmp group must not slow every dyn-gitops command down."""
    code = (
        "import sys; import dyn_gitops.cli; "
        "print(sorted(m for m in sys.modules if m.startswith(('dyn_gitops', 'pydantic'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = eval(out)
    assert "dyn_gitops.cli.cmp" in loaded
    assert not [
        m for m in loaded if m.startswith(("pydantic", "dyn_gitops.argocd", "dyn_gitops.pipeline"))
    ]


def test_client_imports_almost_nothing() -> None:
    code = (
        f"import sys; sys.path.append({str(REPO)!r}); before = set(sys.modules); "
        "import dyn_gitops.argocd.client; print(sorted(set(sys.modules) - before))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert set(eval(out)) <= {
        "dyn_gitops",
        "dyn_gitops.argocd",
        "dyn_gitops.argocd.client",
        "_socket",
        "__future__",
    }  # not even os: a start in ms
