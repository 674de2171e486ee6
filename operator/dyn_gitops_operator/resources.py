"""The API resources the controller reads and writes, and the shape of a watch event.

Plain data without any client, so the ``KubeApi`` protocol, its fake and the reconcilers
name resources without importing the ``kubernetes`` package (only ``kube`` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict
from urllib.parse import quote

Obj = dict[str, Any]


class WatchEvent(TypedDict):
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    object: Obj


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base


DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
#: read as the operator's storage version since 1.2 (``dgdview`` also reads a v1alpha1 object)
DGDS = Resource("nvidia.com", "v1beta1", "dynamographdeployments", "DynamoGraphDeployment")
DGDSAS = Resource(
    "nvidia.com",
    "v1alpha1",
    "dynamographdeploymentscalingadapters",
    "DynamoGraphDeploymentScalingAdapter",
)
DYNAMO_MODELS = Resource("nvidia.com", "v1alpha1", "dynamomodels", "DynamoModel")
SERVICES = Resource("", "v1", "services", "Service")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
LWS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")
#: listed by the rollout (never watched, never cached) only while a worker service rolls: its
#: floor counts the pods that are Ready now, not a Deployment's possibly stale status; also
#: the workers of a DynamoModel's base model (read only): the pods its Service selects
PODS = Resource("", "v1", "pods", "Pod")
#: core/v1 Events (created only: a terminal error of a graph, on its DGD)
EVENTS = Resource("", "v1", "events", "Event")
#: what Grove creates from a PodCliqueSet (read, and scaled through /scale)
PODCLIQUES = Resource("grove.io", "v1alpha1", "podcliques", "PodClique")
PCSGS = Resource("grove.io", "v1alpha1", "podcliquescalinggroups", "PodCliqueScalingGroup")
#: Git's; read (GET) and patched only for a restart: the restartAt clique annotations
PODCLIQUESETS = Resource("grove.io", "v1alpha1", "podcliquesets", "PodCliqueSet")
#: Flux's sources (read: an annotated one is rendered) and the ExternalArtifact (Flux 2.7,
#: RFC-0012) the controller writes for each, with its status
GIT_REPOSITORIES = Resource("source.toolkit.fluxcd.io", "v1", "gitrepositories", "GitRepository")
OCI_REPOSITORIES = Resource("source.toolkit.fluxcd.io", "v1", "ocirepositories", "OCIRepository")
EXTERNAL_ARTIFACTS = Resource(
    "source.toolkit.fluxcd.io", "v1", "externalartifacts", "ExternalArtifact"
)

__all__ = [
    "DEPLOYMENTS",
    "DGDS",
    "DGDSAS",
    "DYNAMO_MODELS",
    "EVENTS",
    "EXTERNAL_ARTIFACTS",
    "GIT_REPOSITORIES",
    "LEASES",
    "LWS",
    "OCI_REPOSITORIES",
    "PCSGS",
    "PODCLIQUES",
    "PODCLIQUESETS",
    "PODS",
    "SERVICES",
    "Obj",
    "Resource",
    "WatchEvent",
]
