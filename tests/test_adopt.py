"""``dyn-gitops adopt --check`` (docs/migration.md): the live objects the Dynamo operator
created, compared with the render of the same DGD, before GitOps applies anything.

The live state is the operator's own output (``conformance/operator-output``, its reconcilers
run at upstream 2a6da14c8) with what a cluster adds: the owner references the operator sets
(``ctrl.SetControllerReference`` in ``internal/controller_common/resource.go``
``SyncObservedResource``: a DCD owns its Deployment/LeaderWorkerSet/Service, the DGD owns
the DCDs and the discovery RBAC), the field manager of its plain creates and updates
(``manager``, the binary ``deploy/operator/Dockerfile`` builds) and server defaults.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.adoption import AS_OPERATOR, EXAMPLES, operator_output
from support.cli import invoke_cli
from support.parity import OUTPUTS, pairs
from support.paths import REPO

from dyn_gitops import context
from dyn_gitops.errors import ExitCode
from dyn_gitops.workflows import adoption

Obj = dict[str, Any]
AGG = "examples__backends__vllm__deploy__agg.yaml"
MULTINODE = "examples__backends__vllm__deploy__disagg-multinode.yaml"


def as_live(objs: list[Obj]) -> list[Obj]:
    """``objs`` as ``kubectl get -o yaml`` shows them after the operator created them: owner
    references to the DGD or a stand-in DCD (named as its workload), the operator's field
    manager, a uid, server defaults in the pod templates, canonical quantities."""
    out = copy.deepcopy(objs)
    for o in out:
        meta = o["metadata"]
        graph = (meta.get("labels") or {}).get("nvidia.com/dynamo-graph-deployment-name")
        owner = ("DynamoComponentDeployment", meta["name"])
        if o["kind"] not in ("Deployment", "LeaderWorkerSet", "Service"):
            owner = ("DynamoGraphDeployment", graph or "vllm-agg")
        meta["uid"] = f"uid-{o['kind']}-{meta['name']}"
        meta["resourceVersion"] = "42"
        meta["ownerReferences"] = [
            {
                "apiVersion": "nvidia.com/v1alpha1",
                "kind": owner[0],
                "name": owner[1],
                "uid": "owner-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        meta["managedFields"] = [{"manager": "manager", "operation": "Update", "fieldsV1": {}}]
        template = (o.get("spec") or {}).get("template") or {}
        for c in (template.get("spec") or {}).get("containers") or []:
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("imagePullPolicy", "IfNotPresent")
        o["status"] = {"observedGeneration": 1}
    return out


def write(tmp_path: Path, objs: list[Obj], name: str = "live.yaml", as_list: bool = True) -> Path:
    p = tmp_path / name
    data: Any = {"apiVersion": "v1", "kind": "List", "items": objs}
    p.write_text(yaml.safe_dump(data) if as_list else yaml.safe_dump_all(objs))
    return p


def adopt(live: Path, example: str = AGG, *extra: str) -> Any:
    return invoke_cli(
        "adopt", "--check", "--live", str(live), str(EXAMPLES / example), *AS_OPERATOR, *extra
    )


def report(live: Path, example: str = AGG, *extra: str) -> tuple[int, Obj]:
    res = adopt(live, example, "-o", "json", *extra)
    return res.code, json.loads(res.stdout)


def effects(data: Obj, effect: str) -> set[str]:
    return {f"{f['kind']}/{f['name']}" for f in data["findings"] if f["effect"] == effect}


@pytest.mark.parametrize("example", [AGG, MULTINODE])
def test_the_operators_objects_adopt_without_restart_or_deletion(
    tmp_path: Path, example: str
) -> None:
    """The operator's output for an example (a Deployment worker; LeaderWorkerSet workers),
    live with its owner references, field manager and server defaults: nothing restarts or
    is deleted; each owner reference (to a DCD, or to the DGD the render does not emit
    here) and the operator's field manager are handover steps."""
    live = as_live(operator_output(example))
    code, data = report(write(tmp_path, live), example)
    assert code == 0, data
    assert data["disruptive"] is False
    assert data["counts"]["restart"] == data["counts"]["recreate"] == data["counts"]["delete"] == 0
    handover = [f for f in data["findings"] if f["effect"] == "handover"]
    owned = {f"{f['kind']}/{f['name']}" for f in handover if "ownerReference" in f["message"]}
    assert owned == {f"{o['kind']}/{o['metadata']['name']}" for o in live}
    assert all("manager" in f["message"] for f in handover if "fields managed" in f["message"])
    kinds = {o["kind"] for o in live}
    assert ("LeaderWorkerSet" in kinds) == (example == MULTINODE)


def test_a_changed_pod_template_is_a_restart(tmp_path: Path) -> None:
    """A worker whose live image differs from the render's: the apply changes its template
    (a new template hash rolls every pod); exit 5, the field named."""
    live = as_live(operator_output(AGG))
    worker = next(o for o in live if o["metadata"]["name"] == "vllm-agg-worker-f0983e7f")
    main = worker["spec"]["template"]["spec"]["containers"][0]
    main["image"] = "nvcr.io/other:1"
    res = adopt(write(tmp_path, live))
    assert res.code == ExitCode.WOULD_DISRUPT, res.stderr
    assert int(ExitCode.WOULD_DISRUPT) == 5
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("restart"))
    assert "Deployment/vllm-agg-worker-f0983e7f" in line
    assert f"spec.template.spec.containers[{main['name']}].image" in line
    assert res.stdout.splitlines()[-1].startswith("adopt check: would disrupt the graph")


def test_another_worker_hash_is_a_deletion_and_names_the_replacement(tmp_path: Path) -> None:
    """The render with the live webhook's origin-version stamp (the default setting) gives the
    worker another hash: the live worker would be pruned and a new one created."""
    live = as_live(operator_output(AGG))
    code, data = report(write(tmp_path, live), AGG, "--origin-version", "1.5.1")
    assert code == 5
    deleted = effects(data, "delete")
    assert deleted == {"Deployment/vllm-agg-worker-f0983e7f", "Service/vllm-agg-worker-f0983e7f"}
    message = next(f["message"] for f in data["findings"] if f["effect"] == "delete")
    assert "vllm-agg-worker-" in message and "origin-version" in message
    assert any(n.startswith("Deployment/vllm-agg-worker-") for n in effects(data, "create"))


def test_immutable_fields_are_recreations(tmp_path: Path) -> None:
    """A live Deployment whose selector has another value: the apply is refused unless
    forced, which deletes and recreates it (exit 5). A headless Service rendered over a live
    one with a cluster IP, or another type: the same."""
    live = as_live(operator_output(AGG))
    dep = next(o for o in live if o["kind"] == "Deployment")
    labels = dep["spec"]["selector"]["matchLabels"]
    labels[next(iter(labels))] = "other"
    code, data = report(write(tmp_path, live))
    assert code == 5
    recreated = [f for f in data["findings"] if f["effect"] == "recreate"]
    assert [(f"{f['kind']}/{f['name']}", f["fields"]) for f in recreated] == [
        (f"Deployment/{dep['metadata']['name']}", ["spec.selector"])
    ]
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"}}
    live_svc = {**svc, "spec": {"clusterIP": "10.0.0.7", "type": "ClusterIP"}}
    rendered = {**svc, "spec": {"clusterIP": "None", "type": "NodePort"}}
    found = adoption.check([rendered], [live_svc]).findings
    assert [(f.effect, f.paths) for f in found] == [("recreate", ("spec.clusterIP", "spec.type"))]


def test_the_operators_component_deployments_are_handed_over_not_deleted(tmp_path: Path) -> None:
    """A live DCD of the graph (the operator's own object, not rendered): a handover step
    (delete it after the owner references to it are gone); an old worker generation the
    render does not hold: a deletion."""
    live = as_live(operator_output(AGG))
    dcd = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {
            "name": "vllm-agg-worker-f0983e7f",
            "namespace": "default",
            "labels": {"nvidia.com/dynamo-graph-deployment-name": "vllm-agg"},
        },
        "spec": {},
    }
    old = copy.deepcopy(next(o for o in live if o["metadata"]["name"].endswith("f0983e7f")))
    old["metadata"]["name"] = "vllm-agg-worker-00000000"
    old["metadata"]["labels"]["nvidia.com/dynamo-worker-hash"] = "00000000"
    code, data = report(write(tmp_path, [*live, dcd, old]))
    assert code == 5
    assert "DynamoComponentDeployment/vllm-agg-worker-f0983e7f" in effects(data, "handover")
    assert effects(data, "delete") == {f"{old['kind']}/vllm-agg-worker-00000000"}


def test_live_objects_as_documents_and_a_rerun_after_the_apply(tmp_path: Path) -> None:
    """One document per object works as a List does; after the migration (the applier owns
    the fields, no owner references) nothing is left to hand over."""
    live = as_live(operator_output(AGG))
    for o in live:
        del o["metadata"]["ownerReferences"]
        o["metadata"]["managedFields"] = [{"manager": "argocd-controller", "operation": "Apply"}]
    code, data = report(write(tmp_path, live, as_list=False))
    assert code == 0
    assert data["counts"]["handover"] == 0


def test_applied_keeps_defaults_and_compares_quantities_by_value() -> None:
    """The model of the apply: a defaulted live field stays, keyed items merge, a quantity
    is compared by value; an atomic list that differs is replaced."""
    live = {"resources": {"limits": {"cpu": "500m"}}, "args": ["a"], "env": [{"name": "A"}]}
    rendered = {"resources": {"limits": {"cpu": 0.5}}, "args": ["a"], "env": [{"name": "B"}]}
    after = adoption.applied(live, rendered)
    assert after["resources"] == live["resources"]
    assert after["env"] == [{"name": "A"}, {"name": "B"}]
    assert adoption.differences(live, after) == ["env"]
    assert adoption.applied({"args": ["a"]}, {"args": ["b"]}) == {"args": ["b"]}


def test_bad_live_input_is_exit_1_with_file_and_line(tmp_path: Path) -> None:
    """A live file with a document that is no object and a YAML error: every problem as
    file:line, exit 1, nothing on stdout; a missing file is a usage error."""
    bad = tmp_path / "live.yaml"
    bad.write_text("apiVersion: v1\nkind: List\nitems:\n- kind: Service\n---\nkey: [\n")
    res = adopt(bad)
    assert res.code == 1 and res.stdout == ""
    assert f"{bad}:1: items[0]: not a Kubernetes object" in res.stderr
    assert f"{bad}:" in res.stderr.splitlines()[1]
    assert "problems found; nothing checked" in res.stderr
    missing = adopt(tmp_path / "nope.yaml")
    assert missing.code == 2 and "--live" in missing.stderr


def test_check_is_required() -> None:
    """adopt applies nothing: without --check it refuses (usage)."""
    res = invoke_cli("adopt", "--live", "x.yaml", str(EXAMPLES / AGG))
    assert res.code == 2 and "--check" in res.stderr


def test_an_owner_reference_to_the_rendered_dgd_stays(tmp_path: Path) -> None:
    """With the DGD in the render (setting emit-source), a reference to it stays (deleting
    the DGD then deletes the object, as the companion controller's own references do); the
    references to the DCDs, which go, are handover steps."""
    live = as_live(operator_output(AGG))
    code, data = report(write(tmp_path, live), AGG, "--emit-source")
    assert code == 0
    owned = {
        f"{f['kind']}/{f['name']}"
        for f in data["findings"]
        if f["effect"] == "handover" and "ownerReference" in f["message"]
    }
    assert owned == {
        f"{o['kind']}/{o['metadata']['name']}"
        for o in live
        if o["metadata"]["ownerReferences"][0]["kind"] == "DynamoComponentDeployment"
    }


@pytest.mark.parametrize("output", sorted(OUTPUTS))
def test_every_example_the_operator_created_adopts_without_disruption(output: str) -> None:
    """Each upstream example's objects as the operator created them (component path and
    Grove path), against their render with the operator's configuration and dyn-gitops'
    default managed replicas: nothing restarts, is recreated or deleted."""
    disruptive = {}
    for example, expected in pairs(REPO.parent / "shared", output):
        live = [
            o
            for o in yaml.safe_load_all(expected.read_text())
            if isinstance(o, dict) and o.get("kind") != "OracleReport"
        ]
        ctx = context.open_path(
            str(example), runner=context.Runner(flags={**OUTPUTS[output], "managed-replicas": True})
        )
        found = adoption.check(context.render(ctx).objects, live, "default")
        disruptive[example.name] = [
            str(f) for f in found.findings if f.effect in adoption.DISRUPTIVE
        ]
    assert len(disruptive) > 30
    assert {k: v for k, v in disruptive.items() if v} == {}


def test_a_grove_cliques_replicas_scale_without_a_new_template() -> None:
    """A PodCliqueSet whose clique replicas differ (scaled): a change, not a restart; its
    clique's pod spec differing: a restart."""
    pcs: Obj = {
        "apiVersion": "grove.io/v1alpha1",
        "kind": "PodCliqueSet",
        "metadata": {"name": "g", "namespace": "n"},
        "spec": {"template": {"cliques": [{"name": "w", "spec": {"replicas": 2, "podSpec": {}}}]}},
    }
    scaled = copy.deepcopy(pcs)
    scaled["spec"]["template"]["cliques"][0]["spec"]["replicas"] = 3
    assert [f.effect for f in adoption.check([scaled], [pcs]).findings] == ["change"]
    scaled["spec"]["template"]["cliques"][0]["spec"]["podSpec"] = {"hostNetwork": True}
    assert [f.effect for f in adoption.check([scaled], [pcs]).findings] == ["restart", "change"]


def test_only_quantities_compare_by_value() -> None:
    """``"1k"`` and ``"1000"`` are one quantity in a resource list, two label values."""
    live = {"labels": {"size": "1k"}, "resources": {"requests": {"memory": "1k"}}}
    rendered = {"labels": {"size": "1000"}, "resources": {"requests": {"memory": "1000"}}}
    assert adoption.differences(live, adoption.applied(live, rendered)) == ["labels.size"]
    assert adoption.applied({"a": True}, {"a": "1"}) == {"a": "1"}
