"""Small inputs several test modules feed the CLI: a two-service DGD, a KRM ResourceList."""

from __future__ import annotations

from typing import Any


def small_dgd(name: str) -> str:
    """A two-service DGD (frontend with 2 replicas, a 1-GPU worker with 3), as YAML text."""
    return f"""\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: {name}
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: 2
      extraPodSpec:
        mainContainer:
          image: example.com/dynamo:1.1.0
    VllmWorker:
      componentType: worker
      replicas: 3
      resources:
        limits:
          gpu: "1"
      extraPodSpec:
        mainContainer:
          image: example.com/dynamo:1.1.0
"""


def frontend_dgd(name: str) -> str:
    """The smallest DGD: one frontend, one replica, as YAML text."""
    return f"""\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: {name}
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: 1
      extraPodSpec:
        mainContainer:
          image: example.com/dynamo:1.1.0
"""


def resource_list(items: list[dict[str, Any]], config: dict[str, Any] | None = None) -> str:
    """A KRM ResourceList of ``items`` (and a functionConfig), as YAML text."""
    import yaml

    rl: dict[str, Any] = {
        "apiVersion": "config.kubernetes.io/v1",
        "kind": "ResourceList",
        "items": items,
    }
    if config is not None:
        rl["functionConfig"] = config
    return yaml.safe_dump(rl, sort_keys=False)
