"""The Argo CD health checks and resource customizations we ship.

The Lua runs in Lua 5.1 (lupa), the language of Argo CD's gopher-lua, inside Argo CD's
default sandbox: the base and table libraries only, no string library (not even string
methods), and the object as the global ``obj``. Each kind's ``health_test.yaml`` uses Argo
CD's own resource_customizations test format. The same cases also run in Argo CD's own Lua
runtime (``util/lua``, through ``argocd admin settings resource-overrides health`` of the full
argocd binary), and the DGD script once more inside a real application-controller
(tests/test_argocd_e2e.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51

from dyn_gitops import keys

REPO = Path(__file__).resolve().parent.parent
ARGOCD = REPO / "deploy" / "argocd"
CUSTOMIZATIONS = ARGOCD / "resource_customizations"
CUSTOM = CUSTOMIZATIONS / "nvidia.com"
KINDS = ("DynamoGraphDeployment", "DynamoGraphDeploymentScalingAdapter", "DynamoModel")
#: every kind we ship a health check for, as (group, kind): the Dynamo kinds, and Grove's
#: PodCliqueSet (rendered on the Grove path; Argo CD has no built-in check for it)
HEALTH_KINDS = (*(("nvidia.com", k) for k in KINDS), ("grove.io", "PodCliqueSet"))

# Argo CD (util/lua) opens package, base, table and a safe os; the health script sees obj.
_SANDBOX = """
function(src, obj)
  local env = {obj = obj, ipairs = ipairs, pairs = pairs, next = next, type = type,
               tostring = tostring, tonumber = tonumber, select = select, unpack = unpack,
               error = error, assert = assert, pcall = pcall, rawget = rawget,
               rawset = rawset, rawequal = rawequal, setmetatable = setmetatable,
               getmetatable = getmetatable, table = table,
               os = {time = os.time, clock = os.clock, date = os.date}}
  local fn, err = loadstring(src, "=health.lua")
  if fn == nil then error(err) end
  setfenv(fn, env)
  local hs = fn()
  return hs.status, hs.message
end
"""


def run_health(kind: str, obj: dict[str, Any], group: str = "nvidia.com") -> tuple[str, str]:
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.execute('getmetatable("").__index = nil')  # no string methods, as in Argo CD
    script = (CUSTOMIZATIONS / group / kind / "health.lua").read_text()
    status, message = lua.eval(_SANDBOX)(script, lua.table_from(obj, recursive=True))
    return str(status), str(message)


def _cases() -> list[Any]:
    out = []
    for group, kind in HEALTH_KINDS:
        spec = yaml.safe_load((CUSTOMIZATIONS / group / kind / "health_test.yaml").read_text())
        for case in spec["tests"]:
            out.append(pytest.param(group, kind, case, id=f"{kind}-{Path(case['inputPath']).stem}"))
    return out


@pytest.mark.parametrize(("group", "kind", "case"), _cases())
def test_health(group: str, kind: str, case: dict[str, Any]) -> None:
    obj = yaml.safe_load((CUSTOMIZATIONS / group / kind / case["inputPath"]).read_text())
    assert obj["apiVersion"].split("/")[0] == group and obj["kind"] == kind
    status, message = run_health(kind, obj, group)
    assert (status, message) == (case["healthStatus"]["status"], case["healthStatus"]["message"])


@pytest.mark.parametrize(("group", "kind"), HEALTH_KINDS)
def test_cases_cover_healthy_progressing_degraded_and_stale(group: str, kind: str) -> None:
    spec = yaml.safe_load((CUSTOMIZATIONS / group / kind / "health_test.yaml").read_text())
    statuses = {c["healthStatus"]["status"] for c in spec["tests"]}
    assert {"Healthy", "Progressing", "Degraded"} <= statuses
    stale = [c for c in spec["tests"] if "stale" in c["inputPath"]]
    assert stale, "a case with status.observedGeneration behind metadata.generation"
    for case in stale:
        obj = yaml.safe_load((CUSTOMIZATIONS / group / kind / case["inputPath"]).read_text())
        # a DynamoModel's status has no observedGeneration: its conditions carry it
        observed = obj["status"].get("observedGeneration") or min(
            c["observedGeneration"] for c in obj["status"]["conditions"]
        )
        assert observed < obj["metadata"]["generation"]


def test_stale_success_is_not_healthy() -> None:
    """A successful state from an older generation says nothing about the new spec."""
    obj = yaml.safe_load((CUSTOM / KINDS[0] / "testdata" / "healthy.yaml").read_text())
    assert run_health(KINDS[0], obj)[0] == "Healthy"
    obj["metadata"]["generation"] += 1
    assert run_health(KINDS[0], obj) == (
        "Progressing",
        "Waiting for the controller to observe generation 4 (observed 3)",
    )


def test_scripts_need_no_string_library() -> None:
    """The sandbox really refuses string methods, so the checks above prove the scripts."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.execute('getmetatable("").__index = nil')
    with pytest.raises(lua51.LuaError):
        lua.eval(_SANDBOX)(
            'local s = "x" return {status = s:upper(), message = ""}', lua.table_from({})
        )


def test_rendered_objects_without_status_are_progressing(tmp_path: Path) -> None:
    """What the renderer emits (no status yet) is Progressing, never an error."""
    from support.paths import CONFORMANCE
    from support.rendering import render

    objects = render(REPO / "samples" / "scaling-adapter" / "input")
    objects += render(CONFORMANCE / "examples__backends__vllm__deploy__lora__lora-model.yaml")
    seen = set()
    for obj in objects:
        if obj["kind"] in KINDS:
            assert run_health(obj["kind"], obj) == (
                "Progressing",
                "Waiting for the controller to report status",
            )
            seen.add(obj["kind"])
    assert seen == set(KINDS)


# --- the configuration that carries the scripts ------------------------------------
def _cm_data() -> dict[str, dict[str, str]]:
    cm = yaml.safe_load((ARGOCD / "kustomize" / "argocd-cm.yaml").read_text())
    values = yaml.safe_load((ARGOCD / "helm-values.yaml").read_text())
    return {
        "kustomize/argocd-cm.yaml": cm["data"],
        "helm-values.yaml configs.cm": values["configs"]["cm"],
    }


@pytest.mark.parametrize("where", ["kustomize/argocd-cm.yaml", "helm-values.yaml configs.cm"])
def test_argocd_cm_carries_the_tested_scripts(where: str) -> None:
    data = _cm_data()[where]
    for group, kind in HEALTH_KINDS:
        key = f"resource.customizations.health.{group}_{kind}"
        assert data[key] == (CUSTOMIZATIONS / group / kind / "health.lua").read_text(), (
            f"{where}: {key}"
        )


def test_rendered_podcliquesets_without_status_are_progressing() -> None:
    from support.rendering import render

    objects = render(REPO / "samples" / "grove-multinode" / "input")
    sets = [o for o in objects if o["kind"] == "PodCliqueSet"]
    assert sets
    for obj in sets:
        assert run_health("PodCliqueSet", obj, "grove.io") == (
            "Progressing",
            "Waiting for Grove to report status",
        )


@pytest.mark.parametrize("where", ["kustomize/argocd-cm.yaml", "helm-values.yaml configs.cm"])
def test_ignore_differences_for_the_companion_controller(where: str) -> None:
    data = _cm_data()[where]
    manager = keys.CONTROLLER_FIELD_MANAGER
    for gk in (
        "apps_Deployment",
        "nvidia.com_DynamoGraphDeployment",
        "nvidia.com_DynamoGraphDeploymentScalingAdapter",
        "grove.io_PodCliqueSet",
    ):
        rule = yaml.safe_load(data[f"resource.customizations.ignoreDifferences.{gk}"])
        assert rule["managedFieldsManagers"] == [manager], gk
    adapter = yaml.safe_load(
        data[
            "resource.customizations.ignoreDifferences."
            "nvidia.com_DynamoGraphDeploymentScalingAdapter"
        ]
    )
    assert adapter["jsonPointers"] == ["/spec/replicas"]  # autoscalers write it via /scale


@pytest.mark.parametrize("name", ["application.yaml", "applicationset.yaml"])
def test_sample_applications(name: str) -> None:
    from dyn_gitops.argocd.plugin import PLUGIN_REF

    doc = yaml.safe_load((ARGOCD / name).read_text())
    spec = doc["spec"] if doc["kind"] == "Application" else doc["spec"]["template"]["spec"]
    assert spec["source"]["plugin"]["name"] == PLUGIN_REF
    for env in spec["source"]["plugin"].get("env", []):  # spelled as cmpenv reads them
        assert env["name"].startswith("DYN_GITOPS_")
    options = spec["syncPolicy"]["syncOptions"]
    assert "ServerSideApply=true" in options and "RespectIgnoreDifferences=true" in options
    managers = {
        m for rule in spec["ignoreDifferences"] for m in rule.get("managedFieldsManagers", [])
    }
    assert managers == {keys.CONTROLLER_FIELD_MANAGER}
    assert {(r["group"], r["kind"]) for r in spec["ignoreDifferences"]} == {
        ("apps", "Deployment"),
        ("nvidia.com", "DynamoGraphDeployment"),
        ("nvidia.com", "DynamoGraphDeploymentScalingAdapter"),
        ("grove.io", "PodCliqueSet"),
    }
    cm = _cm_data()["kustomize/argocd-cm.yaml"]
    for rule in spec["ignoreDifferences"]:  # the same rules as the system-wide ones
        group = f"{rule['group']}_" if rule["group"] else ""
        system = yaml.safe_load(
            cm[f"resource.customizations.ignoreDifferences.{group}{rule['kind']}"]
        )
        assert {k: v for k, v in rule.items() if k not in ("group", "kind")} == system


def test_the_hydrator_application_is_the_sample_with_a_dry_source() -> None:
    """deploy/argocd/application-hydrator.yaml (docs/argocd.md section 11) is application.yaml
    with ``spec.source`` as the Source Hydrator's ``drySource`` (the plugin with it: Argo CD
    v3.5.3 ``DrySource.Plugin``, pkg/apis/application/v1alpha1/types.go) and a
    ``syncSource`` that is not the repository root (the hydrator refuses it)."""
    sample = yaml.safe_load((ARGOCD / "application.yaml").read_text())
    hydrated = yaml.safe_load((ARGOCD / "application-hydrator.yaml").read_text())
    hydrator = hydrated["spec"].pop("sourceHydrator")
    assert hydrator["drySource"] == sample["spec"].pop("source")
    assert hydrated == sample
    sync = hydrator["syncSource"]
    assert sync["path"] not in ("", ".", "/") and sync["targetBranch"] != "main"
    assert set(hydrator) == {"drySource", "syncSource"}


# --------------------------------------------------------------- Argo CD's own Lua (util/lua)
@pytest.mark.parametrize(("group", "kind", "case"), _cases())
def test_health_in_argo_cds_own_lua(
    test_binaries: Any, group: str, kind: str, case: dict[str, Any]
) -> None:
    """The same cases through Argo CD's real Lua runtime (gopher-lua, Argo's sandbox), beside
    the lupa emulation above: ``argocd admin settings resource-overrides health`` of the full
    argocd binary (tools/test-bins/build.sh) with our kustomize/argocd-cm.yaml."""
    import os
    import subprocess

    argocd = test_binaries("argocd-cmp-server")["argocd-cmp-server"]
    proc = subprocess.run(
        [str(argocd), "admin", "settings", "resource-overrides", "health",
         str(CUSTOMIZATIONS / group / kind / case["inputPath"]),
         "--argocd-cm-path", str(ARGOCD / "kustomize" / "argocd-cm.yaml")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "ARGOCD_BINARY_NAME": "argocd"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = dict(
        line.split(": ", 1)
        for line in proc.stdout.splitlines()
        if line.startswith(("STATUS", "MESSAGE"))
    )
    want = case["healthStatus"]
    assert got.get("STATUS") == want["status"], proc.stdout
    assert got.get("MESSAGE", "") == want.get("message", ""), proc.stdout
