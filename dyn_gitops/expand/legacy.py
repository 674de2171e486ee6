"""The legacy ``DYN_DEPLOYMENT_CONFIG`` env (JSON), still honoured by the operator.

Read, as the 1.5 operator reads it (``applyDynDeploymentConfig`` in
``internal/dynamo/graph.go``, upstream main ``014cc221``, run by ``generateSingleDCD`` after
``applyDGDTemplateDefaults``), from the env of the component's container ``main`` with the
DGD's env merged under it (a v1alpha1 service's container ``main`` holds its ``envs`` with
``extraPodSpec.mainContainer.env`` merged over them by the conversion). For a frontend, the
entry of the component (or of ``frontend``) gets ``"port": 8000``; ``ServiceArgs.workers``
sets replicas when the component sets none; ``ServiceArgs.resources`` (cpu, memory, gpu as
``nvidia.com/gpu``, custom) are set key by key in both requests and limits of container
``main`` (``applyDynDeploymentResources``).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from .. import naming
from ..errors import FieldPath
from ..models import v1beta1
from ..parse import json_loads_bounded
from ..settings import RenderSettings
from ..workerhash.quantity import QuantityError, value_of
from .context import MAIN, ComponentError, main_container, main_container_data
from .defaults import FRONTEND_PORT

ENV_NAME = "DYN_DEPLOYMENT_CONFIG"
#: the JSON in that variable nests no deeper than a document may
CONFIG_MAX_DEPTH: int = RenderSettings.max_depth


def _get(obj: Any, key: str) -> Any:
    """Go's encoding/json matches struct fields case-insensitively: so do we."""
    if not isinstance(obj, dict):
        return None
    if key in obj:
        return obj[key]
    lower = key.lower()
    return next((v for k, v in obj.items() if isinstance(k, str) and k.lower() == lower), None)


#: the order a side's resources are written in (the dedicated fields' order)
_FIRST = ("cpu", "memory", naming.GPU_RESOURCE)


def apply(
    component: v1beta1.Component, graph_envs: tuple[dict[str, Any], ...] | list[dict[str, Any]]
) -> tuple[v1beta1.Component, dict[str, str]]:
    """The component with the config applied (replicas, container ``main``'s resources),
    and env values to replace (name -> value); errors at the env var read."""
    raw, where = _read(component, graph_envs)
    if raw is None:
        return component, {}
    main = main_container_data(component)
    try:
        config = json_loads_bounded(raw, max_depth=CONFIG_MAX_DEPTH)
    except ValueError as exc:
        raise where.error(f"{ENV_NAME} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise where.error(f"{ENV_NAME} must be a JSON object keyed by service")
    service = component.name
    overrides: dict[str, str] = {}
    if component.type == naming.FRONTEND:
        entry = config.get(service)
        if not isinstance(entry, dict):
            entry = config.get(naming.FRONTEND)
        if isinstance(entry, dict):
            entry["port"] = FRONTEND_PORT
            # Go's json.Marshal: sorted keys, no spaces
            overrides[ENV_NAME] = json.dumps(config, sort_keys=True, separators=(",", ":"))
    entry = config.get(service)
    args = _get(entry, "ServiceArgs")
    if not isinstance(args, dict):
        return component, overrides
    data: dict[str, Any] | None = None
    workers = _get(args, "workers")
    if isinstance(workers, int) and component.replicas is None:
        data = component.model_dump(exclude_unset=True)
        data["replicas"] = workers
    res = _get(args, "resources")
    if isinstance(res, dict):
        values = _resource_values(res, where)
        data = data if data is not None else component.model_dump(exclude_unset=True)
        _write_main_resources(data, main.get("resources") or {}, values)
    if data is None:
        return component, overrides
    return v1beta1.Component.model_validate(data), overrides


class _Where(NamedTuple):
    """Where the config is written: an env var of container ``main`` (its index), or of the
    DGD (``in_graph``: a path of the DGD's form)."""

    path: FieldPath
    in_graph: bool = False

    def error(self, message: str) -> ComponentError:
        return ComponentError(self.path, message, in_main=not self.in_graph, in_graph=self.in_graph)


def _read(
    component: v1beta1.Component, graph_envs: tuple[dict[str, Any], ...] | list[dict[str, Any]]
) -> tuple[str | None, _Where]:
    """The config's text and where it is written: container ``main``'s wins over the DGD's,
    the last of a name wins (``MergeEnvs``)."""
    typed = main_container(component)
    env = (typed.env if typed is not None else None) or []
    own = [j for j, e in enumerate(env) if e.name == ENV_NAME]
    if own:
        return env[own[-1]].value, _Where(("env", own[-1]))
    graph = [j for j, e in enumerate(graph_envs) if e.get("name") == ENV_NAME]
    if graph:
        return graph_envs[graph[-1]].get("value"), _Where(("spec", "env", graph[-1]), True)
    return None, _Where(())


def _resource_values(res: dict[str, Any], where: _Where) -> dict[str, str]:
    """``ServiceArgs.resources`` as resource names and quantities (``gpu`` is
    ``nvidia.com/gpu``), each checked as the operator's ``resource.ParseQuantity`` would."""
    values: dict[str, str] = {}
    for key, name in (("cpu", "cpu"), ("memory", "memory"), ("gpu", naming.GPU_RESOURCE)):
        value = _get(res, key)
        if value is not None and str(value) != "":
            values[name] = str(value)
    custom = _get(res, "custom")
    if isinstance(custom, dict):
        values.update({str(k): str(v) for k, v in custom.items()})
    for name, value in values.items():
        try:
            if value != value.strip():
                raise QuantityError(value)
            value_of(value)
        except QuantityError:
            raise where.error(
                f"{ENV_NAME}: ServiceArgs.resources sets {name} to {value!r}, which is not a "
                "Kubernetes quantity (such as '1', '500m' or '8Gi')"
            ) from None
    return values


def _side(current: dict[str, Any] | None, values: dict[str, str]) -> dict[str, Any]:
    """One side (requests or limits) with ``values`` set key by key, in the order the
    dedicated fields are written (cpu, memory, GPU, then the rest as they come)."""
    merged = {str(k): str(v) for k, v in (current or {}).items()}
    merged.update(values)
    return {
        **{k: merged[k] for k in _FIRST if k in merged},
        **{k: v for k, v in merged.items() if k not in _FIRST},
    }


def _write_main_resources(
    data: dict[str, Any], current: dict[str, Any], values: dict[str, str]
) -> None:
    """Set ``values`` in both requests and limits of container ``main`` in the component
    dump ``data`` (an empty side stays absent, as Go's omitempty leaves it)."""
    resources: dict[str, Any] = {}
    if current.get("claims"):
        resources["claims"] = current["claims"]
    for side in ("limits", "requests"):
        written = _side(current.get(side), values)
        if written:
            resources[side] = written
    template = data.setdefault("podTemplate", {})
    pod = template.setdefault("spec", {})
    containers = pod.setdefault("containers", [])
    main_data = next((c for c in containers if c.get("name") == MAIN), None)
    if main_data is None:
        main_data = {"name": MAIN}
        containers.insert(0, main_data)
    main_data["resources"] = resources
