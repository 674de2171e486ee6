"""Flux's CEL health checks of the DGD (samples/flux/*/flux-kustomization.yaml) on the 1.5
status, state by state: every Argo CD health case of the DGD
(deploy/argocd/resource_customizations/nvidia.com/DynamoGraphDeployment) gets the same
verdict from Flux (Healthy = Current, Degraded = Failed, Progressing = InProgress).

The expressions are evaluated by cel-python (Flux evaluates the same CEL with cel-go)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
ARGO = REPO / "deploy" / "argocd" / "resource_customizations" / "nvidia.com"
ARGO_DGD = ARGO / "DynamoGraphDeployment"
FLUX = {
    "git": REPO / "samples" / "flux" / "git" / "flux-kustomization.yaml",
    "oci": REPO / "samples" / "flux" / "oci" / "flux-kustomization.yaml",
}
ARGO_TO_FLUX = {"Healthy": "Current", "Degraded": "Failed", "Progressing": "InProgress"}


def _check(sample: str, kind: str = "DynamoGraphDeployment") -> dict[str, Any]:
    kust = yaml.safe_load(FLUX[sample].read_text())
    (check,) = [e for e in kust["spec"]["healthCheckExprs"] if e["kind"] == kind]
    return dict(check)


def flux_health(obj: dict[str, Any], sample: str = "git") -> str:
    """Flux's verdict: failed first, then current, else in progress. An object without a
    status is given an empty one (its expressions guard every field with has())."""
    import celpy

    check = _check(sample, obj["kind"])
    assert check["apiVersion"] == obj["apiVersion"]
    env = celpy.Environment()
    activation = {k: celpy.json_to_cel(v) for k, v in {"status": {}, **obj}.items()}

    def holds(expr: str) -> bool:
        return bool(env.program(env.compile(expr)).evaluate(activation))

    if holds(check["failed"]):
        return "Failed"
    return "Current" if holds(check["current"]) else "InProgress"


def _argo_cases() -> list[Any]:
    spec = yaml.safe_load((ARGO_DGD / "health_test.yaml").read_text())
    return [
        pytest.param(c["inputPath"], c["healthStatus"]["status"], id=Path(c["inputPath"]).stem)
        for c in spec["tests"]
    ]


def test_the_checks_read_the_served_version() -> None:
    """Flux matches the check by apiVersion: the DGD is nvidia.com/v1beta1 (storage)."""
    for sample in FLUX:
        assert _check(sample)["apiVersion"] == "nvidia.com/v1beta1"
    assert _check("git") == _check("oci")


@pytest.mark.parametrize(("path", "argo"), _argo_cases())
def test_flux_agrees_with_argo_cd_on_every_state(path: str, argo: str) -> None:
    obj = yaml.safe_load((ARGO_DGD / path).read_text())
    assert flux_health(obj) == ARGO_TO_FLUX[argo]


def test_every_state_of_the_status_is_covered() -> None:
    """States, fine-grained Ready reasons, rolling-update and restart phases all have a
    case (so each has a Flux and an Argo CD verdict)."""
    seen: dict[str, set[str]] = {
        "state": set(),
        "reason": set(),
        "rolling": set(),
        "restart": set(),
    }
    for path in (ARGO_DGD / "testdata").glob("*.yaml"):
        st = yaml.safe_load(path.read_text()).get("status") or {}
        seen["state"].add(st.get("state"))
        for c in st.get("conditions") or []:
            seen["reason"].add(c.get("reason"))
        seen["rolling"].add((st.get("rollingUpdate") or {}).get("phase"))
        seen["restart"].add((st.get("restart") or {}).get("phase"))
    assert {"initializing", "pending", "successful", "failed"} <= seen["state"]
    assert {
        "all_resources_are_ready",
        "some_resources_are_not_ready",
        "insufficient_capacity",
        "pods_not_ready",
        "updating",
        "mixed_not_ready_reasons",
        "rolling_update_in_progress",
    } <= seen["reason"]
    assert {"InProgress", "Failed", "Completed"} <= seen["rolling"]
    assert {"Restarting", "Failed", "Completed"} <= seen["restart"]


def test_a_ready_condition_of_an_older_generation_is_not_current() -> None:
    obj = yaml.safe_load((ARGO_DGD / "testdata" / "healthy.yaml").read_text())
    assert flux_health(obj) == "Current"
    obj["status"]["conditions"][0]["observedGeneration"] = obj["metadata"]["generation"] - 1
    assert flux_health(obj) == "InProgress"
    obj["status"]["conditions"][0]["observedGeneration"] = obj["metadata"]["generation"]
    obj["status"]["conditions"][0]["status"] = "False"
    assert flux_health(obj) == "InProgress"  # successful state, but Ready says no


ARGO_MODEL = ARGO / "DynamoModel"


def _model_cases() -> list[Any]:
    spec = yaml.safe_load((ARGO_MODEL / "health_test.yaml").read_text())
    return [
        pytest.param(c["inputPath"], c["healthStatus"]["status"], id=Path(c["inputPath"]).stem)
        for c in spec["tests"]
    ]


@pytest.mark.parametrize("sample", sorted(FLUX))
@pytest.mark.parametrize(("path", "argo"), _model_cases())
def test_flux_agrees_with_argo_cd_on_every_dynamo_model_state(
    path: str, argo: str, sample: str
) -> None:
    obj = yaml.safe_load((ARGO_MODEL / path).read_text())
    assert flux_health(obj, sample) == ARGO_TO_FLUX[argo]


def test_a_dynamo_model_failure_of_an_older_generation_is_in_progress() -> None:
    obj = yaml.safe_load((ARGO_MODEL / "testdata" / "degraded.yaml").read_text())
    assert flux_health(obj) == "Failed"
    obj["metadata"]["generation"] += 1  # a new spec: the old failure says nothing of it
    assert flux_health(obj) == "InProgress"
