"""Provider-native Grove overrides at the DGD, component and role level, and explicit
multinode component roles.

Upstream sources: #13273 df7deed0d (``internal/provideroverride/registry.go``
``ExpectedTarget`` / ``ValidateValue``, ``grove.go`` ``ComposeGroveOverrides``,
``webhook/validation/shared_v1beta1.go`` ``validateProviderOverride``,
``dynamographdeployment.go`` ``groveTopologyOverrideCompositionErrors``, all @ 2a6da14c8)
and #14419 (v1.5.0, cherry-picked to release/1.5.0 as #14488: ``roles[]`` with
``providerOverride``, ``validateComponentRoles``; ``roles[].replicas`` from #14477).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from support.rendering import AS_APPLIED, renderer

from dyn_gitops.errors import RenderError

Obj = dict[str, Any]
GROVE = "grove.io/v1alpha1"
IMAGE = "nvcr.io/dynamo:1.5.1"


def component(name: str, ctype: str, **extra: Any) -> Obj:
    main: Obj = {"name": "main", "image": IMAGE}
    if ctype == "worker":
        main["command"] = ["python3", "-m", "dynamo.vllm"]
        main["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    return {"name": name, "type": ctype, "podTemplate": {"spec": {"containers": [main]}}, **extra}


def dgd(components: list[Obj], **spec: Any) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "po", "namespace": "ns"},
        "spec": {"backendFramework": "vllm", **spec, "components": components},
    }


def topo(domain: str, target: str | None = None, root: bool = False) -> Obj:
    tc = {"packDomain": domain}
    value = (
        {"spec": {"template": {"topologyConstraint": tc}}} if root else {"topologyConstraint": tc}
    )
    out: Obj = {"apiVersion": GROVE, "value": value}
    if target is not None:
        out["target"] = target
    return out


MULTINODE = {"multinode": {"nodeCount": 2}}


render = renderer(grove=True, **AS_APPLIED)


def errors(tmp_path: Path, doc: Obj, **settings: Any) -> str:
    with pytest.raises(RenderError) as info:
        render(tmp_path, doc, **settings)
    return "\n".join(str(p) for p in info.value.problems)


def template(objs: list[Obj]) -> Obj:
    (pcs,) = [o for o in objs if o["kind"] == "PodCliqueSet"]
    t: Obj = pcs["spec"]["template"]
    return t


def by_name(items: list[Obj]) -> dict[str, Obj]:
    return {i["name"]: i for i in items}


def test_overrides_land_on_their_grove_destinations(tmp_path: Path) -> None:
    """grove.go ComposeGroveOverrides @ 2a6da14c8 (#13273), role scope per #14419: the root
    on spec.template, a single-node component on its clique, a multinode component on its
    scaling group, a role on its -ldr/-wkr clique; targets resolved when omitted."""
    doc = dgd(
        [
            component("Frontend", "frontend", providerOverride=topo("rack")),
            component(
                "decode",
                "worker",
                **MULTINODE,
                providerOverride=topo("block"),
                roles=[
                    {"name": "leader"},
                    {"name": "worker", "providerOverride": topo("host", "PodCliqueTemplateSpec")},
                ],
            ),
        ],
        providerOverride=topo("zone", root=True),
    )
    t = template(render(tmp_path, doc))
    assert t["topologyConstraint"] == {"packDomain": "zone"}
    cliques = by_name(t["cliques"])
    assert cliques["frontend"]["topologyConstraint"] == {"packDomain": "rack"}
    assert cliques["decode-wkr"]["topologyConstraint"] == {"packDomain": "host"}
    assert "topologyConstraint" not in cliques["decode-ldr"]
    assert list(cliques["frontend"])[-2:] == ["topologyConstraint", "spec"]
    group = by_name(t["podCliqueScalingGroups"])["decode"]
    assert group["topologyConstraint"] == {"packDomain": "block"}


def test_the_fragment_replaces_and_keeps_unknown_fields(tmp_path: Path) -> None:
    """grove.go groveTopologyConstraint @ 2a6da14c8: the subtree is copied as written, so a
    newer Grove field survives an older Dynamo schema."""
    value = {"topologyConstraint": {"packDomain": "rack", "futureField": {"x": 1}}}
    doc = dgd(
        [component("Frontend", "frontend", providerOverride={"apiVersion": GROVE, "value": value})]
    )
    clique = by_name(template(render(tmp_path, doc))["cliques"])["frontend"]
    assert clique["topologyConstraint"] == value["topologyConstraint"]


def test_force_scaling_group_component_targets_its_scaling_group(tmp_path: Path) -> None:
    """registry.go ExpectedTarget @ 2a6da14c8: a component that UsesPCSG (here
    experimental.grove.forceScalingGroup) resolves to PodCliqueScalingGroupConfig."""
    c = component("Frontend", "frontend", providerOverride=topo("rack"))
    c["experimental"] = {"grove": {"forceScalingGroup": True}}
    t = template(render(tmp_path, dgd([c])))
    assert by_name(t["podCliqueScalingGroups"])["frontend"]["topologyConstraint"] == {
        "packDomain": "rack"
    }
    assert "topologyConstraint" not in by_name(t["cliques"])["frontend"]
    c["providerOverride"] = topo("rack", "PodCliqueTemplateSpec")
    assert "must match the provider-context target 'PodCliqueScalingGroupConfig'" in errors(
        tmp_path, dgd([c])
    )


def test_off_grove_every_override_is_refused(tmp_path: Path) -> None:
    """shared_v1beta1.go validateProviderOverride @ 2a6da14c8: requires workload provider
    grove; the component provider refuses the fragment."""
    doc = dgd(
        [component("Frontend", "frontend", providerOverride=topo("rack"))],
        providerOverride=topo("zone", root=True),
    )
    text = errors(tmp_path, doc, grove=False)
    assert "spec.providerOverride: provider overrides require the workload provider" in text
    assert "spec.components[0].providerOverride: provider overrides require" in text
    doc["metadata"]["annotations"] = {"nvidia.com/enable-grove": "false"}
    assert "require the workload provider" in errors(tmp_path, doc)


def test_api_version_target_and_value_are_checked(tmp_path: Path) -> None:
    """registry.go ValidateValue and validateProviderOverride @ 2a6da14c8: only
    grove.io/v1alpha1, the location's target, and only the topologyConstraint subtree."""
    bad_api = dgd(
        [component("Frontend", "frontend", providerOverride={**topo("rack"), "apiVersion": "x/v1"})]
    )
    assert "apiVersion: unsupported value 'x/v1'" in errors(tmp_path, bad_api)
    bad_target = dgd(
        [component("Frontend", "frontend", providerOverride=topo("rack", "PodCliqueSet"))]
    )
    assert "must match the provider-context target 'PodCliqueTemplateSpec'" in errors(
        tmp_path, bad_target
    )
    owned = topo("rack")
    owned["value"]["spec"] = {"replicas": 3}
    text = errors(tmp_path, dgd([component("Frontend", "frontend", providerOverride=owned)]))
    assert "providerOverride.value.spec: is Dynamo-owned or not enabled" in text
    root = {"apiVersion": GROVE, "value": {"spec": {"replicas": 2}}}
    text = errors(tmp_path, dgd([component("Frontend", "frontend")], providerOverride=root))
    assert "spec.providerOverride.value.spec.replicas: is Dynamo-owned" in text
    assert "spec.providerOverride.value.spec.template: is required" in text
    typed = topo("rack")
    typed["value"]["topologyConstraint"]["packDomain"] = 5
    assert "packDomain: must be a string" in errors(
        tmp_path, dgd([component("Frontend", "frontend", providerOverride=typed)])
    )


def test_a_role_override_needs_a_multinode_component(tmp_path: Path) -> None:
    """registry.go ExpectedTarget @ 2a6da14c8: a role scope requires a multinode component."""
    roles = [{"name": "leader"}, {"name": "worker", "providerOverride": topo("host")}]
    doc = dgd([component("decode", "worker", multinode={"nodeCount": 1}, roles=roles)])
    assert "roles[1].providerOverride: a role override requires a multinode component" in errors(
        tmp_path, doc
    )


def test_typed_topology_and_topology_overrides_do_not_mix(tmp_path: Path) -> None:
    """dynamographdeployment.go groveTopologyOverrideCompositionErrors @ 2a6da14c8."""
    doc = dgd(
        [component("Frontend", "frontend", providerOverride=topo("rack"))],
        topologyConstraint={"clusterTopologyName": "t", "packDomain": "zone"},
    )
    assert "providerOverride.value: cannot be combined with spec.topologyConstraint" in errors(
        tmp_path, doc
    )


def test_explicit_roles_render_like_the_implicit_layout(tmp_path: Path) -> None:
    """#14419 (v1.5.0): existing manifests lower exactly as before, and declaring the complete
    leader/worker list without role overrides is representation-only."""
    implicit = dgd([component("decode", "worker", **MULTINODE)])
    explicit = copy.deepcopy(implicit)
    explicit["spec"]["components"][0]["roles"] = [{"name": "leader"}, {"name": "worker"}]
    sources = [o for o in render(tmp_path, implicit) if o["kind"] != "DynamoGraphDeployment"]
    again = [o for o in render(tmp_path, explicit) if o["kind"] != "DynamoGraphDeployment"]
    assert again == sources


@pytest.mark.parametrize(
    ("roles", "multinode", "message"),
    [
        ([{"name": "leader"}, {"name": "worker"}], False, "roles: roles are supported only"),
        ([{"name": "leader"}], True, "roles: must contain the 'worker' role"),
        (
            [{"name": "leader"}, {"name": "leader"}, {"name": "worker"}],
            True,
            "roles[1].name: duplicate role 'leader'",
        ),
        ([{"name": "leader"}, {"name": "gms"}], True, "roles[1].name: unsupported value 'gms'"),
        (
            [{"name": "leader"}, {"name": "worker", "replicas": 3}],
            True,
            "roles[1].replicas: must equal 1 for multinode role 'worker'",
        ),
        (
            [{"name": "leader", "podTemplate": {}}, {"name": "worker"}],
            True,
            "roles[0].podTemplate: is not supported for this component role",
        ),
    ],
)
def test_role_schema_is_closed(
    tmp_path: Path, roles: list[Obj], multinode: bool, message: str
) -> None:
    """shared_v1beta1.go validateComponentRoles (#14419; replicas per #14477)."""
    extra = MULTINODE if multinode else {}
    doc = dgd([component("decode", "worker", **extra, roles=roles)])
    assert f"spec.components[0].{message}" in errors(tmp_path, doc)


def test_v1alpha1_overrides_at_graph_and_service_level(tmp_path: Path) -> None:
    """#13273: v1alpha1 carries providerOverride on the DGD spec and on each service."""
    doc = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "po", "namespace": "ns"},
        "spec": {
            "providerOverride": topo("zone", root=True),
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "providerOverride": topo("rack"),
                    "extraPodSpec": {"mainContainer": {"image": IMAGE}},
                }
            },
        },
    }
    t = template(render(tmp_path, doc))
    assert t["topologyConstraint"] == {"packDomain": "zone"}
    assert by_name(t["cliques"])["frontend"]["topologyConstraint"] == {"packDomain": "rack"}
