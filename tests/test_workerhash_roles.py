"""Explicit multinode ``roles`` (#14419) and the worker hash.

At upstream 2a6da14c8 (the operator the conformance oracle ran) ``roles`` does not exist:
``api/v1beta1/common.go`` has ``MultinodeSpec{nodeCount, leader, worker}`` and the hash is
Go's ``json.Marshal`` of each generated worker DCD's spec (``ComputeDGDWorkersSpecHash``,
``internal/dynamo/hash.go`` @ 2a6da14c8), so a ``roles`` list could not reach it. After
#14419 the operator's own tests pin what the hash does with roles
(``deploy/operator/internal/dynamo/hash_test.go`` of ai-dynamo/dynamo after #14419, read in
the public code index, which does not name its commit):
``TestComputeBetaDGDWorkersSpecHash_EquivalentExplicitRolesDoNotRoll`` (names-only roles, in
reverse order, hash as the implicit layout) and
``TestComputeBetaDGDWorkersSpecHash_CanonicalizesExplicitRoleOrder`` (with a worker
``providerOverride``: reordering the roles, or writing ``replicas`` equal to the role's
cardinality, keeps the hash). dyn-gitops leaves ``roles`` out of the hash, which gives the
same answers. Main already matched: these tests pin it.
"""

from __future__ import annotations

import copy
from typing import Any

from dyn_gitops.workerhash import compute, hub

Obj = dict[str, Any]

WORKER_OVERRIDE: Obj = {
    "apiVersion": "grove.io/v1alpha1",
    "target": "PodCliqueTemplateSpec",
    "value": {"topologyConstraint": {"topologyName": "cluster", "pack": {"required": "rack"}}},
}


def implicit() -> Obj:
    """The upstream tests' fixture: one multinode worker of 4 nodes, no roles."""
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "test", "namespace": "default"},
        "spec": {
            "components": [{"name": "worker", "type": "worker", "multinode": {"nodeCount": 4}}]
        },
    }


def with_roles(roles: list[Obj]) -> Obj:
    dgd = implicit()
    dgd["spec"]["components"][0]["roles"] = copy.deepcopy(roles)
    return dgd


def worker_hash(dgd: Obj) -> str:
    return compute.worker_hash(hub.graph(dgd, "default"))


def test_equivalent_explicit_roles_do_not_roll() -> None:
    """``TestComputeBetaDGDWorkersSpecHash_EquivalentExplicitRolesDoNotRoll``: the implicit
    leader/worker layout written out, in reverse declaration order, is the same generation."""
    explicit = with_roles([{"name": "worker"}, {"name": "leader"}])
    assert worker_hash(explicit) == worker_hash(implicit())


def test_role_order_and_cardinality_do_not_roll() -> None:
    """``TestComputeBetaDGDWorkersSpecHash_CanonicalizesExplicitRoleOrder``: with a worker
    provider override, swapping the roles or writing their cardinality (1 and nodeCount-1)
    keeps the hash."""
    roles = [{"name": "leader"}, {"name": "worker", "providerOverride": WORKER_OVERRIDE}]
    base = worker_hash(with_roles(roles))
    assert worker_hash(with_roles(roles[::-1])) == base
    counted = [{**roles[0], "replicas": 1}, {**roles[1], "replicas": 3}]
    assert worker_hash(with_roles(counted)) == base
