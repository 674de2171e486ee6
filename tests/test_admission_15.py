"""The Dynamo 1.5 runtime-version admission beyond a DGD's create: a standalone
DynamoComponentDeployment, and a DGD created before 1.5 (the webhook's update ratchet, which a
stateless render replaces with the origin stamp written in Git).

Sources: ``deploy/operator/internal/webhook/validation/dynamocomponentdeployment.go``,
``shared_v1alpha1.go``, ``shared_v1beta1.go`` and ``shared_helpers.go`` @ 2a6da14c8 (#10494),
and the same files on the 1.5 release line (yueying-AIHorizon/dynamo@3d741331:
``toleratesMissingRuntimeVersionOverride``, the EPP exception). Every render here runs with the
default ``runtime-version-admission: strict`` unless a test says otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliResult, invoke_cli, run_cli

from dyn_gitops import keys

Obj = dict[str, Any]
VLLM = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
FRONTEND = "nvcr.io/nvidia/ai-dynamo/frontend"
#: images whose runtime version does not resolve: :latest, a custom tag, a digest
UNRESOLVED = [f"{VLLM}:latest", f"{VLLM}:my-tag", f"{VLLM}@sha256:" + "a" * 64]
ORIGIN = keys.ANN_OPERATOR_ORIGIN_VERSION
OVERRIDE_REQUIRED = "runtimeVersionOverride: is required when the main container image"


def dcd(version: str, image: str | None, *, ctype: str = "worker", origin: str = "") -> Obj:
    """A standalone DCD of one vLLM worker (or ``ctype``) in API ``version``."""
    main: Obj = {"name": "main", "command": ["python3", "-m", "dynamo.vllm"]}
    if image is not None:
        main["image"] = image
    meta: Obj = {"name": "w"}
    if origin:
        meta["annotations"] = {ORIGIN: origin}
    if version == "v1beta1":
        spec: Obj = {"type": ctype, "podTemplate": {"spec": {"containers": [main]}}}
    else:
        del main["name"]
        spec = {"componentType": ctype, "extraPodSpec": {"mainContainer": main}}
    if ctype == "worker":
        spec["backendFramework"] = "vllm"
    return {
        "apiVersion": f"nvidia.com/{version}",
        "kind": "DynamoComponentDeployment",
        "metadata": meta,
        "spec": spec,
    }


def dgd(image: str | None, *, origin: str | None = None, epp: bool = False) -> Obj:
    """A v1alpha1 DGD: a frontend on a 1.5.1 image and a vLLM worker on ``image``."""
    main: Obj = {"command": ["python3", "-m", "dynamo.vllm"]}
    if image is not None:
        main["image"] = image
    services: Obj = {
        "Frontend": {
            "componentType": "frontend",
            "extraPodSpec": {"mainContainer": {"image": f"{VLLM}:1.5.1"}},
        },
        "Worker": {"componentType": "worker", "extraPodSpec": {"mainContainer": main}},
    }
    if epp:
        services["Epp"] = {
            "componentType": "epp",
            "extraPodSpec": {"mainContainer": {"image": f"{FRONTEND}:latest"}},
        }
    meta: Obj = {"name": "g"}
    if origin is not None:
        meta["annotations"] = {ORIGIN: origin}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": meta,
        "spec": {"services": services},
    }


def cli(tmp_path: Path, doc: Obj, *flags: str, subprocess: bool = False) -> CliResult:
    """``dyn-gitops render`` of ``doc`` written to ``tmp_path/in.yaml``."""
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    run = run_cli if subprocess else invoke_cli
    return run("render", str(path), "--namespace", "ns", *flags)


def worker_main(res: CliResult) -> Obj:
    """The main container of the one worker Deployment rendered."""
    deps = [
        o
        for o in yaml.safe_load_all(res.stdout)
        if o["kind"] == "Deployment"
        and re.fullmatch(r"w|g-worker-[0-9a-f]{8}", o["metadata"]["name"])
    ]
    assert len(deps) == 1, [d["metadata"]["name"] for d in deps]
    (main,) = [c for c in deps[0]["spec"]["template"]["spec"]["containers"] if c["name"] == "main"]
    return main


def legacy_profile(main: Obj) -> bool:
    """Every runtime gate off: no canary health checks, worker liveness failureThreshold 1."""
    env = {e["name"]: e.get("value") for e in main.get("env") or []}
    return (
        env.get("DYN_HEALTH_CHECK_ENABLED") == "false"
        and main["livenessProbe"]["failureThreshold"] == 1
    )


def refused(res: CliResult, pattern: str) -> None:
    assert res.code == 1, (res.code, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    assert re.search(pattern, res.stderr), res.stderr


# ------------------------------------------------------------ 1. standalone DCD admission
@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
@pytest.mark.parametrize("image", UNRESOLVED, ids=["latest", "custom-tag", "digest"])
def test_standalone_dcd_with_unresolved_image_renders_the_legacy_profile(
    tmp_path: Path, version: str, image: str
) -> None:
    """``dynamocomponentdeployment.go`` @ 2a6da14c8: the DCD validator sets
    ``allowMissingRuntimeVersionOverride: true`` on create and update, so
    ``validateDynamoComponentDeploymentSharedSpec`` never requires ``runtimeVersionOverride``
    on a standalone DCD; its runtime version does not resolve, so the controller renders the
    legacy profile (every runtime gate off). On main: exit 1, "runtimeVersionOverride: is
    required"."""
    res = cli(tmp_path, dcd(version, image))
    assert res.code == 0, res.stderr
    assert res.stderr == ""  # admitted as the operator admits it: no warning either
    assert legacy_profile(worker_main(res))


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_standalone_dcd_still_needs_a_main_image(tmp_path: Path, version: str) -> None:
    """``shared_v1beta1.go`` / ``shared_v1alpha1.go`` @ 2a6da14c8: the allowance is for the
    override only; ``image == ""`` is "Required" whatever ``allowMissingRuntimeVersionOverride``
    says (a pin: main refuses it too)."""
    refused(
        cli(tmp_path, dcd(version, None)),
        r"DynamoComponentDeployment/w: spec\.\S*image: is required",
    )


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_standalone_epp_dcd_needs_a_runtime_version(tmp_path: Path, version: str) -> None:
    """``toleratesMissingRuntimeVersionOverride`` (``shared_helpers.go`` on the 1.5 release
    line, yueying-AIHorizon/dynamo@3d741331): a standalone DCD is exempt unless its type is
    ``epp``, whose eppConfig contract (Go EPP before 1.5.0, Rust EPP from it) needs a resolved
    runtime version; with an override it renders (a pin: main refuses every unresolved DCD)."""
    doc = dcd(version, f"{FRONTEND}:latest", ctype="epp")
    refused(
        cli(tmp_path, doc),
        r"DynamoComponentDeployment/w: spec\.runtimeVersionOverride: is required",
    )
    doc["spec"]["runtimeVersionOverride"] = "1.5.1"
    res = cli(tmp_path, doc)
    assert res.code == 0, res.stderr


def test_dgd_components_need_the_override_epp_or_not(tmp_path: Path) -> None:
    """``dynamographdeployment.go`` @ 2a6da14c8 builds its ``sharedValidation`` without
    ``allowMissingRuntimeVersionOverride``: every DGD component with an unresolved image,
    worker and EPP alike, needs ``runtimeVersionOverride`` (a pin: unchanged from main)."""
    res = cli(tmp_path, dgd(f"{VLLM}:latest", epp=True))
    refused(res, rf"spec\.services\.Worker\.{OVERRIDE_REQUIRED}")
    assert f"spec.services.Epp.{OVERRIDE_REQUIRED}" in res.stderr


# ------------------------------------------------------------ 2. admission on update
@pytest.mark.parametrize("origin", ["1.4.0", "1.0.0", "v1.4", "1.5.0-rc.1"])
def test_pre_15_origin_stamp_admits_an_unresolved_image_with_a_warning(
    tmp_path: Path, origin: str
) -> None:
    """The update ratchet of ``validateDynamoComponentDeploymentSharedSpecUpdate``
    (``shared_v1beta1.go`` @ 2a6da14c8): the override is required only if the (image,
    runtimeVersionOverride) pair changed since the old object. A render has no old object; the
    origin stamp the 1.5 defaulting webhook writes on create
    (``webhook/defaulting/dynamographdeployment_handler.go``), older than 1.5.0 (semver order,
    as ``compatibility.Gate`` reads it: a 1.5.0 prerelease is older), stands for one created
    before 1.5: rendered with the legacy profile and a warning that names the stamp. On main:
    exit 1, "runtimeVersionOverride: is required"."""
    res = cli(tmp_path, dgd(f"{VLLM}:latest", origin=origin))
    assert res.code == 0, res.stderr
    (line,) = res.stderr.splitlines()
    assert re.match(
        r"in\.yaml:\d+: DynamoGraphDeployment/g: spec\.services\.Worker\.runtimeVersionOverride: ",
        line,
    ), line
    assert f"admitted because {ORIGIN} is '{origin}', older than 1.5.0" in line
    assert line.endswith("(warning)")
    assert legacy_profile(worker_main(res))
    stored = next(o for o in yaml.safe_load_all(res.stdout) if o["kind"] == "DynamoGraphDeployment")
    assert stored["metadata"]["annotations"][ORIGIN] == origin  # the stamp is kept as written


def test_pre_15_origin_stamp_admits_a_component_without_image(tmp_path: Path) -> None:
    """The same ratchet keeps admitting an image absent before and after
    (``newImage == "" && oldImage != ""`` is the only refusal, ``shared_v1beta1.go`` @
    2a6da14c8): a warning that also says the API server refuses the workload. On main: exit 1,
    "image: is required"."""
    res = cli(tmp_path, dgd(None, origin="1.4.0"))
    assert res.code == 0, res.stderr
    (line,) = res.stderr.splitlines()
    assert "spec.services.Worker.extraPodSpec.mainContainer.image: no main-container image" in line
    assert "the API server refuses a workload without one (warning)" in line


@pytest.mark.parametrize("origin", [None, "1.5.0", "1.5.1", "2.0.0"])
def test_no_stamp_or_a_15_stamp_is_checked_as_on_create(tmp_path: Path, origin: str | None) -> None:
    """A DGD without a stamp is new to the 1.5 webhook (it stamps it), one stamped 1.5.0 or
    later was created under the rule: refused as on create (``shared_v1alpha1.go`` @
    2a6da14c8); the message names both ways to admit it. On main: refused too, but the
    message named only the lenient setting."""
    res = cli(tmp_path, dgd(f"{VLLM}:latest", origin=origin))
    refused(res, rf"spec\.services\.Worker\.{OVERRIDE_REQUIRED}")
    assert "runtime-version-admission: lenient" in res.stderr
    assert f"or an annotation {ORIGIN} older than 1.5.0" in res.stderr


def test_pre_15_stamp_on_an_epp_dcd(tmp_path: Path) -> None:
    """The DCD validator of the 1.5 release line ratchets an EPP DCD's unchanged pair as the
    DGD's (``validateDynamoComponentDeploymentSharedSpecUpdate`` with
    ``toleratesMissingRuntimeVersionOverride``, yueying-AIHorizon/dynamo@3d741331): its stamp
    admits it the same way, with a warning. On main: exit 1."""
    res = cli(tmp_path, dcd("v1beta1", f"{FRONTEND}:latest", ctype="epp", origin="1.4.0"))
    assert res.code == 0, res.stderr
    assert (
        "spec.runtimeVersionOverride: the main container image has no semantic-version"
        in res.stderr
    )


def test_lenient_stays_the_global_escape_hatch(tmp_path: Path) -> None:
    """``runtime-version-admission: lenient`` admits every DGD, stamped or not, without the
    admission warnings (the setting the parity harness passes)."""
    for origin in (None, "1.5.1"):
        res = cli(
            tmp_path, dgd(f"{VLLM}:latest", origin=origin), "--runtime-version-admission", "lenient"
        )
        assert res.code == 0 and res.stderr == "", res.stderr


# ------------------------------------------------------------ bad stamps
@pytest.mark.parametrize(
    "value",
    ["not-a-version", "1.4.0.0", "", " 1.4.0", "1.4.0-", "9" * 30 + ".0.0"],
    ids=["garbage", "four-parts", "empty", "space", "empty-prerelease", "beyond-uint64"],
)
def test_invalid_stamp_is_a_problem_not_a_pass(tmp_path: Path, value: str) -> None:
    """``must be valid semver`` (the validating webhook reads the stamp with Masterminds
    ``NewVersion``, as ``parse_origin``): an invalid stamp admits nothing, is refused at its
    field with file and line, and the runtime-version rule still refuses the image. Through the
    real entry point: exit 1, no traceback (a pin for the refusal; main refused these too)."""
    res = cli(tmp_path, dgd(f"{VLLM}:latest", origin=value), subprocess=True)
    refused(
        res,
        rf"in\.yaml:\d+: DynamoGraphDeployment/g: metadata\.annotations\."
        rf"{re.escape(ORIGIN)}: must be a semantic version",
    )
    assert OVERRIDE_REQUIRED in res.stderr


def test_huge_stamp_is_refused_with_a_short_line(tmp_path: Path) -> None:
    """A 200 000-character stamp (under the API server's 256 KiB annotation limit) is refused
    like any invalid one, and the problem line shows a bounded excerpt of it. On main: exit 1,
    but the line repeated the whole value (over 200 000 characters)."""
    res = cli(tmp_path, dgd(f"{VLLM}:latest", origin="1" * 200_000 + ".0.0"), subprocess=True)
    refused(res, rf"metadata\.annotations\.{re.escape(ORIGIN)}: must be a semantic version")
    assert max(len(line) for line in res.stderr.splitlines()) < 600, (
        "a problem line repeats the value"
    )


def test_non_string_stamp_is_a_problem(tmp_path: Path) -> None:
    """An unquoted ``1.4`` is a YAML number, which no annotation may hold (``ObjectMeta``):
    refused at the annotation, exit 1, no traceback."""
    path = tmp_path / "in.yaml"
    text = yaml.safe_dump(dgd(f"{VLLM}:latest", origin="ORIGIN"), sort_keys=False)
    path.write_text(text.replace("ORIGIN", "1.4"))
    res = run_cli("render", str(path), "--namespace", "ns")
    refused(res, rf"metadata\.annotations\.{re.escape(ORIGIN)}")


def test_huge_image_tag_is_refused_with_a_short_line(tmp_path: Path) -> None:
    """A 100 000-character tag (the API server sets no length limit on an image) is no
    semantic version: refused as ``runtimeVersionOverride: is required``
    (``runtimeVersionOverrideRequired``, ``shared_helpers.go`` @ 2a6da14c8), the tag quoted
    cut. On main: exit 1, but the line quoted the whole tag."""
    res = cli(tmp_path, dgd(f"{VLLM}:" + "a" * 100_000), subprocess=True)
    refused(res, rf"spec\.services\.Worker\.{OVERRIDE_REQUIRED}")
    assert max(len(line) for line in res.stderr.splitlines()) < 600, (
        "a problem line repeats the tag"
    )
