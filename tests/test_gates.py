"""The Dynamo 1.5.1 version gates and admission stamps.

Sources (each test names its own): ``internal/features/runtime/gates.go`` and
``internal/dynamo/component_worker.go`` of the 1.5 release line (#11083, #13512 cherry-picked
to release/1.5.0 as #14490; read at yueying-AIHorizon/dynamo@3d741331, the same gates as
upstream main after 2a6da14c8), ``internal/features/compatibility`` and the webhooks
``internal/webhook/{defaulting,validation}`` @ 2a6da14c8 (#10494, #12942), and
``internal/controller/deployment_strategy.go`` @ 2a6da14c8 (#11909).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import rendering
from support.paths import CONFORMANCE
from support.rendering import AS_APPLIED

from dyn_gitops import gates, keys
from dyn_gitops.errors import RenderError
from dyn_gitops.runtimeversion import Version, parse_origin
from dyn_gitops.settings import SettingsError, resolve

Obj = dict[str, Any]
VLLM = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"


def graph(
    worker: Obj | None = None,
    *,
    annotations: dict[str, str] | None = None,
    image: str | None = f"{VLLM}:1.5.1",
    extra: dict[str, Obj] | None = None,
) -> Obj:
    """A DGD with a frontend and a vLLM worker (``worker`` merged into the worker)."""
    main: Obj = {"command": ["python3", "-m", "dynamo.vllm"]}
    if image is not None:
        main["image"] = image
    services: dict[str, Obj] = {
        "Frontend": {
            "componentType": "frontend",
            "extraPodSpec": {"mainContainer": {"image": f"{VLLM}:1.5.1"}},
        },
        "Worker": {"componentType": "worker", "extraPodSpec": {"mainContainer": main}},
    }
    services["Worker"].update(worker or {})
    services.update(extra or {})
    meta: Obj = {"name": "g"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": meta,
        "spec": {"services": services},
    }


render = rendering.renderer(file="g.yaml", namespace="ns")


def problems(tmp_path: Path, *docs: Obj, **settings: Any) -> str:
    with pytest.raises(RenderError) as exc:
        render(tmp_path, *docs, **settings)
    return str(exc.value)


def one(objs: list[Obj], kind: str, name_part: str = "") -> Obj:
    found = [o for o in objs if o["kind"] == kind and name_part in o["metadata"]["name"]]
    assert len(found) == 1, [o["metadata"]["name"] for o in found]
    return found[0]


def worker_main(objs: list[Obj]) -> Obj:
    dep = one(objs, "Deployment", "-worker")
    (main,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "main"]
    return main


def env(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


# ------------------------------------------------------------------- 2. runtime gates
@pytest.mark.parametrize(
    ("image", "override", "canary", "failures"),
    [
        (f"{VLLM}:1.4.9", None, "false", 1),  # older runtime: legacy profile
        (f"{VLLM}:1.5.0", None, "true", 3),  # the gates' minimum
        (f"{VLLM}:v1.5.1-cuda13", None, "true", 3),  # prefix and suffix: core 1.5.1
        (f"{VLLM}:2.0.0", None, "true", 3),
        (f"{VLLM}:latest", "1.5.1", "true", 3),  # the override declares the version
        (f"{VLLM}:1.5.0", "1.4.0", "false", 1),  # ... and wins over the tag
        (f"{VLLM}:my-tag", None, "false", 1),  # unresolved (lenient): legacy profile
        (f"{VLLM}@sha256:" + "a" * 64, None, "false", 1),
    ],
)
def test_worker_defaults_follow_the_runtime_gates(
    tmp_path: Path, image: str, override: str | None, canary: str, failures: int
) -> None:
    """``component_worker.go`` (1.5 release): DYN_HEALTH_CHECK_ENABLED is CanaryHealthChecks
    (#11083) and the liveness failureThreshold 3 under IncreasedWorkerFailureThreshold (#13512),
    both from runtime 1.5.0; an unresolved version keeps the legacy false / 1."""
    worker = {"runtimeVersionOverride": override} if override else {}
    main = worker_main(
        render(tmp_path, graph(worker, image=image), runtime_version_admission="lenient")
    )
    assert env(main)["DYN_HEALTH_CHECK_ENABLED"] == canary
    assert main["livenessProbe"]["failureThreshold"] == failures
    assert main["readinessProbe"]["failureThreshold"] == 3  # not gated
    assert main["startupProbe"]["failureThreshold"] == 720


def test_user_liveness_probe_and_env_win_over_the_gates(tmp_path: Path) -> None:
    """#13512's table: an explicit pod-template override keeps the user's value; #11083: an
    explicit DYN_HEALTH_CHECK_ENABLED env stays authoritative."""
    probe = {"httpGet": {"path": "/live", "port": "system"}, "failureThreshold": 7}
    worker = {
        "envs": [{"name": "DYN_HEALTH_CHECK_ENABLED", "value": "false"}],
        "livenessProbe": probe,
    }
    main = worker_main(render(tmp_path, graph(worker)))
    assert env(main)["DYN_HEALTH_CHECK_ENABLED"] == "false"
    assert main["livenessProbe"]["failureThreshold"] == 7


def test_runtime_gates_do_not_precede_version_hashing() -> None:
    """``hash_test.go`` TestRuntimeFeatureGatesDoNotPrecedeVersionHashing (1.5 release): no
    runtime gate starts below the first hashed runtime version, so an operator-only upgrade
    cannot change a running (unhashed) worker generation (AGENTS.md, #13244)."""
    assert Version(1, 5, 0) == gates.MIN_HASHED_RUNTIME
    for gate in gates.RUNTIME_GATES:
        assert gate.min_runtime >= gates.MIN_HASHED_RUNTIME, gate.name
        assert not gate.enabled(None)
        assert gate.enabled(gate.min_runtime)
        assert not gate.enabled(Version(1, 4, 99))


@pytest.mark.parametrize(
    ("origin", "enabled"),
    [
        (None, False),  # a DGD older than the stamp
        ("1.5.1", True),
        ("1.0.0", True),
        ("v1.0", True),  # NewVersion coerces
        ("1", True),
        ("01.2.3", True),
        ("0.9.9", False),
        ("1.0.0-rc.1", False),  # a prerelease comes before its release
        ("1.0.0-01", False),  # not a version: disabled
        ("unknown", False),
    ],
)
def test_vllm_multiprocessing_origin_gate(origin: str | None, enabled: bool) -> None:
    """``compatibility/operator_origin.go`` + ``gates.go`` @ 2a6da14c8: VLLMMultiprocessing
    from origin 1.0.0, parsed with Masterminds semver ``NewVersion``; no annotation, or one that
    is not a version, is off."""
    ann = {} if origin is None else {keys.ANN_OPERATOR_ORIGIN_VERSION: origin}
    assert gates.VLLM_MULTIPROCESSING.enabled(ann) is enabled
    if origin == "v1.0":
        parsed = parse_origin(origin)
        assert parsed is not None and parsed.core == Version(1, 0, 0)


# ------------------------------------------------------------------- 3. admission
def test_strict_admission_needs_a_versioned_main_image(tmp_path: Path) -> None:
    """``shared_v1alpha1.go`` @ 2a6da14c8 (#10494, v1.5.0 ledger): every component needs a
    main-container image, and one without a semantic-version tag a runtimeVersionOverride;
    reported with file, line and field path."""
    text = problems(tmp_path, graph(image=f"{VLLM}:my-tag"))
    assert re.search(
        r"g\.yaml:\d+: DynamoGraphDeployment/g: spec\.services\.Worker\.runtimeVersionOverride: "
        r"is required when the main container image has no semantic-version tag \(image tag "
        r'"my-tag" must contain a semantic version such as "1\.1\.0"\)',
        text,
    ), text
    text = problems(tmp_path, graph(image=None))
    assert "spec.services.Worker.extraPodSpec.mainContainer.image: is required" in text
    assert "runtime-version-admission: lenient" in text
    # an override admits any tag; lenient admits both (legacy profile)
    render(tmp_path, graph({"runtimeVersionOverride": "1.5.1"}, image=f"{VLLM}:latest"))
    render(tmp_path, graph(image=None), runtime_version_admission="lenient")


def test_strict_admission_locates_a_v1beta1_field(tmp_path: Path) -> None:
    """The same rule on a v1beta1 DGD points at its own field (``shared_v1beta1.go``)."""
    doc = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g"},
        "spec": {
            "components": [
                {
                    "name": "Worker",
                    "type": "worker",
                    "podTemplate": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": f"{VLLM}:${{VERSION}}",
                                    "command": ["python3", "-m", "dynamo.vllm"],
                                }
                            ]
                        }
                    },
                }
            ]
        },
    }
    text = problems(tmp_path, doc)
    assert 'image tag "${VERSION}"' in text, text
    assert "spec.components[0]" in text, text


def test_runtime_version_override_must_match_the_crd_pattern(tmp_path: Path) -> None:
    """The CRD's pattern of runtimeVersionOverride (api/v1alpha1 @ 2a6da14c8), whatever the
    admission setting: the API server checks it."""
    for bad in ("v1.5.0", "1.5", "01.5.0", "1.5.0-rc1", "12345.0.0"):
        text = problems(
            tmp_path, graph({"runtimeVersionOverride": bad}), runtime_version_admission="lenient"
        )
        assert "spec.services.Worker.runtimeVersionOverride: must be the Dynamo runtime" in text


def test_the_upstream_examples_render_leniently_and_not_strictly(tmp_path: Path) -> None:
    """The 40 upstream examples (conformance/dynamo-examples) were rendered by the 2a6da14c8
    oracle without the 1.5 runtime-version admission: they render with the lenient value; the
    strict default refuses those with ``${VERSION}`` or ``my-tag`` images (#10494)."""
    examples = sorted(CONFORMANCE.glob("*.yaml"))
    assert len(examples) == 40
    refused = []
    for path in examples:
        rendering.render(path, namespace="default", lws=True, dra=True, **AS_APPLIED)
        try:
            rendering.render(path, namespace="default", lws=True, dra=True)
        except RenderError as exc:
            assert "semantic-version tag" in str(exc) or "image: is required" in str(exc)
            refused.append(path.name)
    assert "examples__backends__vllm__deploy__agg.yaml" in refused  # ${VERSION}
    assert "recipes__qwen3-32b__vllm__disagg-kv-router__deploy.yaml" not in refused  # 1.3.1


@pytest.mark.parametrize(
    ("image", "epp_config", "message"),
    [
        ("1.5.0", True, "eppConfig: must be omitted for native Rust EPP images"),
        ("1.5.0", False, None),  # renders the Rust EPP (test_upstream_15_features)
        ("1.4.0", False, "eppConfig is required for an EPP service with a Go EPP image"),
    ],
)
def test_epp_runtime_contract(
    tmp_path: Path, image: str, epp_config: bool, message: str | None
) -> None:
    """NativeRustEPP (1.5 release gates.go, #11355; ``eppRuntimeCompatibilityError`` in the
    release's validation/shared_helpers.go): from runtime 1.5.0 the EPP takes no eppConfig,
    before it needs one."""
    epp: Obj = {
        "componentType": "epp",
        "extraPodSpec": {"mainContainer": {"image": f"nvcr.io/nvidia/ai-dynamo/epp:{image}"}},
    }
    if epp_config:
        epp["eppConfig"] = {"config": {"plugins": []}}
    if message is None:
        assert one(render(tmp_path, graph(extra={"Epp": epp})), "Deployment", "-epp")
    else:
        assert message in problems(tmp_path, graph(extra={"Epp": epp}))


# ------------------------------------------------------------------- 4. origin version
def test_origin_version_is_stamped_where_the_operator_keeps_it(tmp_path: Path) -> None:
    """``DGDDefaulter.Default`` @ 2a6da14c8: on create the webhook stamps the operator version
    (setting origin-version, default the reference 1.5.1) unless the DGD has one; the operator
    propagates it into the components (DCDs) but ``GetDCDKubeAnnotations`` keeps it off the
    Deployments, pod templates and Services it creates (v1beta1_helpers.go)."""
    objs = render(tmp_path, graph())
    source = one(objs, "DynamoGraphDeployment")
    assert source["metadata"]["annotations"][keys.ANN_OPERATOR_ORIGIN_VERSION] == "1.5.1"
    for obj in objs:
        if obj["kind"] in ("Deployment", "Service"):
            assert keys.ANN_OPERATOR_ORIGIN_VERSION not in (
                obj["metadata"].get("annotations") or {}
            )
            tmpl = (obj.get("spec") or {}).get("template") or {}
            assert keys.ANN_OPERATOR_ORIGIN_VERSION not in (
                (tmpl.get("metadata") or {}).get("annotations") or {}
            )
    # the DGD's own annotation wins; "none" stamps nothing (as applied)
    mine = {keys.ANN_OPERATOR_ORIGIN_VERSION: "1.2.0"}
    objs = render(tmp_path, graph(annotations=mine))
    assert (
        one(objs, "DynamoGraphDeployment")["metadata"]["annotations"][
            keys.ANN_OPERATOR_ORIGIN_VERSION
        ]
        == "1.2.0"
    )
    objs = render(tmp_path, graph(), origin_version="none")
    ann = one(objs, "DynamoGraphDeployment")["metadata"].get("annotations") or {}
    assert keys.ANN_OPERATOR_ORIGIN_VERSION not in ann


def test_origin_version_setting_is_a_version_or_none() -> None:
    """The validating webhook refuses an origin version that is not "valid semver"
    (``validateObjectMeta`` @ 2a6da14c8); the setting is checked the same way."""
    assert resolve(flags={"origin-version": "1.6.0"}).settings.origin_version == "1.6.0"
    assert resolve(flags={"origin-version": "none"}).settings.origin_version == "none"
    assert resolve().settings.origin_version == "1.5.1"
    with pytest.raises(SettingsError, match=re.escape("expected a version such as 1.5.1, or none")):
        resolve(flags={"origin-version": "latest"})


def test_origin_stamp_launches_vllm_multinode_with_multiprocessing(tmp_path: Path) -> None:
    """ERRATA 4: a live 1.5 operator stamps the origin version, so a new vLLM multinode DGD
    launches with multiprocessing (``VLLMMultiprocessing`` >= 1.0.0); as applied (no stamp)
    it gets Ray."""
    worker = {
        "multinode": {"nodeCount": 2},
        "resources": {"limits": {"gpu": "8"}},
        "extraPodSpec": {
            "mainContainer": {
                "image": f"{VLLM}:1.5.1",
                "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", "m", "--tensor-parallel-size", "16"],
            }
        },
    }
    stamped = yaml.safe_dump_all(render(tmp_path, graph(worker), lws=True))
    assert "--distributed-executor-backend mp" in stamped or "- mp" in stamped
    as_applied = yaml.safe_dump_all(
        render(tmp_path, graph(worker), lws=True, origin_version="none")
    )
    assert "ray" in as_applied and "--distributed-executor-backend mp" not in as_applied


# ------------------------------------------------------------------- 5. workload provider
def test_workload_provider_is_stamped_on_the_source_dgd(tmp_path: Path) -> None:
    """``defaultWorkloadProvider`` @ 2a6da14c8 (#12942, 73a3fd26f): grove when Grove is on and
    the DGD does not opt out, else component; emitting it keeps a later apply from removing
    what the webhook wrote (upstream-1.5.md section 2, item 1)."""
    objs = render(tmp_path, graph())
    ann = one(objs, "DynamoGraphDeployment")["metadata"]["annotations"]
    assert ann[keys.ANN_WORKLOAD_PROVIDER] == "component"
    objs = render(tmp_path, graph(), grove=True)
    ann = one(objs, "DynamoGraphDeployment")["metadata"]["annotations"]
    assert ann[keys.ANN_WORKLOAD_PROVIDER] == "grove"
    opted_out = {keys.ANN_ENABLE_GROVE: "false", keys.ANN_WORKLOAD_PROVIDER: "component"}
    render(tmp_path, graph(annotations=opted_out), grove=True)  # consistent: accepted


def test_workload_provider_contradicting_the_render_is_refused(tmp_path: Path) -> None:
    """``dynamographdeployment.go`` @ 2a6da14c8: the provider is immutable and the controller
    does not fall back from Grove; a value in Git other than the rendered one is refused."""
    text = problems(tmp_path, graph(annotations={keys.ANN_WORKLOAD_PROVIDER: "grove"}))
    assert (
        "metadata.annotations.nvidia.com/workload-provider: says 'grove' but the DGD renders "
        "with the 'component' provider (the setting grove is false)"
    ) in text
    text = problems(
        tmp_path, graph(annotations={keys.ANN_WORKLOAD_PROVIDER: "component"}), grove=True
    )
    assert 'annotate nvidia.com/enable-grove: "false"' in text
    text = problems(tmp_path, graph(annotations={keys.ANN_WORKLOAD_PROVIDER: "disaggregatedset"}))
    assert "must be 'component' or 'grove', found 'disaggregatedset'" in text


# ------------------------------------------------------------------- 6. Recreate
def test_recreate_strategy_from_the_pod_template_annotation(tmp_path: Path) -> None:
    """#11909 (fe0f219e2), ``generateDeployment`` + ``deployment_strategy.go`` @ 2a6da14c8:
    ``nvidia.com/deployment-strategy: Recreate`` among the component's or its pod template's
    annotations makes the Deployment Recreate (the companion controller does the
    cross-generation part); any other value is a rolling update, with a warning here."""
    recreate = {keys.ANN_DEPLOYMENT_STRATEGY: "Recreate"}
    for worker in ({"annotations": recreate}, {"extraPodMetadata": {"annotations": recreate}}):
        dep = one(render(tmp_path, graph(worker)), "Deployment", "-worker")
        assert dep["spec"]["strategy"] == {"type": "Recreate"}
        dep_ann = dep["metadata"].get("annotations") or {}
        assert dep_ann.get(keys.ANN_DEPLOYMENT_STRATEGY) == "Recreate"  # passed through

    from dyn_gitops import context

    (tmp_path / "g.yaml").write_text(
        yaml.safe_dump(graph({"annotations": {keys.ANN_DEPLOYMENT_STRATEGY: "recreate"}}))
    )
    result = context.render(context.open_path(str(tmp_path), runner=context.Runner(flags={})))
    dep = one(result.objects, "Deployment", "-worker")
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate"
    assert any("'recreate' is not 'Recreate'" in str(w) for w in result.warnings)


def test_the_worker_hash_covers_the_origin_stamp(tmp_path: Path) -> None:
    """conformance/operator-output/README.md and ``hash.go`` @ 2a6da14c8: the stamped origin
    version reaches the worker DCDs' pod template annotations, which the v2 worker hash
    covers; stamped by the setting or written in Git, the hash is the same."""

    def worker_name(objs: list[Obj]) -> str:
        return str(one(objs, "Deployment", "-worker")["metadata"]["name"])

    stamped = worker_name(render(tmp_path, graph()))
    as_applied = worker_name(render(tmp_path, graph(), origin_version="none"))
    in_git = {keys.ANN_OPERATOR_ORIGIN_VERSION: "1.5.1"}
    written = worker_name(render(tmp_path, graph(annotations=in_git), origin_version="none"))
    assert stamped != as_applied
    assert stamped == written


def test_v1beta1_components_take_runtime_version_override(tmp_path: Path) -> None:
    """The v1beta1 component field is ``runtimeVersionOverride`` (its JSON name in
    ``api/v1beta1`` @ 2a6da14c8, #10494): accepted, and it selects the runtime gates."""
    doc = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "b"},
        "spec": {
            "components": [
                {
                    "name": "w",
                    "type": "worker",
                    "runtimeVersionOverride": "1.5.1",
                    "podTemplate": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": f"{VLLM}:custom",
                                    "command": ["python3", "-m", "dynamo.vllm"],
                                }
                            ]
                        }
                    },
                }
            ]
        },
    }
    dep = one(render(tmp_path, doc), "Deployment", "-w-")
    env = {
        e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["DYN_HEALTH_CHECK_ENABLED"] == "true"
