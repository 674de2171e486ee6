"""Setting nvidia-objects: keep a Dynamo operator's hands off what dyn-gitops renders.

A cluster-wide Dynamo 1.5 operator reconciles every DynamoGraphDeployment (and scaling
adapter, DynamoModel, ...) in a namespace without a live ``dynamo-operator-namespace-scope``
Lease (``controller_common/predicate.go`` @ 2a6da14c8): it would create its own
DynamoComponentDeployments and the same-named Deployments next to the rendered ones. With
``omit`` nothing under ``nvidia.com`` is output: the DGD is rendered but not emitted (the
companion controller then works from the workloads alone, as with emit-source off), and what
cannot be rendered without such an object is refused here, at its place in the input.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .errors import Problem
from .settings import RenderSettings

if TYPE_CHECKING:
    from .hubform import Graph

NVIDIA_GROUP_PREFIX = "nvidia.com/"


def omitting(settings: RenderSettings) -> bool:
    return settings.nvidia_objects == "omit"


def emits_source(settings: RenderSettings) -> bool:
    """Whether the source DGD is output (settings emit-source and nvidia-objects)."""
    return settings.emit_source and not omitting(settings)


def passthrough_checks(data: dict[str, Any], settings: RenderSettings) -> Iterator[Problem]:
    """A ``nvidia.com`` object the renderer would pass through unchanged."""
    if omitting(settings) and str(data.get("apiVersion", "")).startswith(NVIDIA_GROUP_PREFIX):
        yield Problem.at(
            ("apiVersion",),
            f"{data.get('kind')} is a nvidia.com object, which a Dynamo operator would act on; "
            "setting nvidia-objects is omit, so none is output: remove it from this input, or "
            "render with nvidia-objects emit where no Dynamo operator reconciles the namespace",
        )


def graph_checks(graph: Graph, settings: RenderSettings) -> Iterator[Problem]:
    """What the DGD would render under ``nvidia.com`` besides itself: scaling adapters (read
    from its v1beta1 form, :class:`.hubform.Graph`: a component with ``scalingAdapter``; a
    v1alpha1 ``scalingAdapter.enabled: false`` converts to none)."""
    if not omitting(settings):
        return
    for loc, c in graph.components.located():
        if c.scalingAdapter is not None:
            yield Problem.at(
                (*loc, "scalingAdapter"),
                "renders a nvidia.com DynamoGraphDeploymentScalingAdapter, which a Dynamo "
                "operator would act on; setting nvidia-objects is omit: disable the adapter "
                "(its Deployment then follows the service's replicas) or render with "
                "nvidia-objects emit where no Dynamo operator reconciles the namespace",
            )
