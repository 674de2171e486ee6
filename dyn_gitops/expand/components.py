"""The internal model of a DGD being expanded: its v1beta1 component list.

The operator holds every DGD in v1beta1 (``spec.components``, each with a ``podTemplate``
whose container ``main`` carries the user's overrides) and renders from that. So does the
expansion, module by module: it reads the DGD's one typed form, :class:`.hubform.Graph`,
built and validated once in validate (a v1beta1 DGD as written, a v1alpha1 DGD converted
**up** as the operator's conversion webhook does), and its typed v1beta1 component list
(:class:`GraphComponents` of :class:`.v1beta1.Component`).

What reads it (``tests/test_internal_model.py`` checks which modules read only it):

* the pod spec builder (:mod:`.podspec`, Deployment, LeaderWorkerSet and Grove pods alike):
  container ``main`` (image, command, args, ports, env, probes, resources, mounts, the
  rest of the container), the pod fields of ``podTemplate.spec``, the other containers,
  the frontend sidecar (the container ``frontendSidecar`` names), ``compilationCache``,
  ``sharedMemorySize`` and ``multinode`` (vLLM elastic EP);
* per component in :mod:`.graph`, :mod:`.grove` and :mod:`.objects`: ``replicas``,
  ``minAvailable``, ``multinode.nodeCount`` (Deployment, LeaderWorkerSet or Grove
  cliques), ``scalingAdapter``, ``modelRef``, ``globalDynamoNamespace``,
  ``podTemplate.metadata`` (pod template labels and annotations), ``topologyConstraint``
  and ``experimental.grove.forceScalingGroup`` (Grove), the single-pod elastic-EP leader,
  each worker's backend (container ``main``'s command, ``graph.resolve_backends``);
* the order components are expanded in (and Grove cliques listed in), each component's
  type, the EPP components and their Go/Rust EPP contract, the component-class label, the
  multinode check, the Planner-scaled workers (:mod:`.replica_owners`) and each
  component's runtime version (:func:`.context.component_runtime`).

The graph level is :class:`Graph`: the DGD's metadata and its v1beta1 ``GraphSpec`` (a
v1alpha1 spec converted up by the operator's ``ConvertFromDynamoGraphDeploymentSpec``),
read by :mod:`.graph`, :mod:`.grove` and :mod:`.objects`.

What v1beta1 cannot say and the renderer still reads stays beside the component
(:class:`Preserved`, ``ComponentContext.preserved``) and the graph (``Graph.pvcs``), as
the operator keeps it in ``nvidia.com/dgd-spec`` (:mod:`dyn_gitops.hubform`). The legacy
``DYN_DEPLOYMENT_CONFIG`` rewrites a component's replicas and container ``main``'s
resources (:func:`.legacy.apply`). No expansion module reads the v1alpha1 model
(``docs/reference-behaviour.md``, *The internal model*).
"""

from __future__ import annotations

from .. import naming
from ..hubform import NOTHING_PRESERVED, Graph, GraphComponents, Preserved
from ..models import v1beta1


def sub_component_type(component: v1beta1.Component, preserved: Preserved) -> str | None:
    """The sub-component type the workload labels carry (``nvidia.com/dynamo-sub-component-
    type``): a v1alpha1 service's ``subComponentType`` as written; a v1beta1 component's
    promoted type (``prefill``/``decode``)."""
    if preserved.alpha:
        return preserved.sub_component_type
    return component.type if component.type in (naming.PREFILL, naming.DECODE) else None


def node_count(component: v1beta1.Component) -> int:
    """The component's ``multinode.nodeCount`` (1: single node)."""
    return component.multinode.nodeCount if component.multinode is not None else 1


def force_scaling_group(component: v1beta1.Component) -> bool:
    """``experimental.grove.forceScalingGroup`` (Grove: a scaling group for one pod)."""
    grove = component.experimental.grove if component.experimental is not None else None
    return bool(grove and grove.get("forceScalingGroup") is True)


__all__ = [
    "NOTHING_PRESERVED",
    "Graph",
    "GraphComponents",
    "Preserved",
    "force_scaling_group",
    "node_count",
    "sub_component_type",
]
