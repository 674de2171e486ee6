"""The legacy ``DYN_DEPLOYMENT_CONFIG`` env (JSON), still honoured by the operator.

Read, as the 1.5 operator reads it (``applyDynDeploymentConfig`` in
``internal/dynamo/graph.go``, upstream main ``014cc221``, run by ``generateSingleDCD`` after
``applyDGDTemplateDefaults``), from the env of the component's container ``main`` with the
DGD's env merged under it (a v1alpha1 service's container ``main`` holds its ``envs`` with
``extraPodSpec.mainContainer.env`` merged over them by the conversion). For a frontend, the
entry of the component (or of ``frontend``) gets ``"port": 8000``; ``ServiceArgs.workers``
sets replicas when the component sets none; ``ServiceArgs.resources`` (cpu, memory, gpu as
``nvidia.com/gpu``, custom) are set key by key in both requests and limits of container
``main`` (``applyDynDeploymentResources``). The config is found, parsed and typed by
:mod:`dyn_gitops.legacyconfig`, which the validate stage checked it with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .. import naming
from ..models import v1beta1
from ..models.k8s import EnvVar
from .context import MAIN, ComponentError, main_container, main_container_data
from .defaults import FRONTEND_PORT

ENV_NAME = naming.DYN_DEPLOYMENT_CONFIG

#: the order a side's resources are written in (the dedicated fields' order)
_FIRST = ("cpu", "memory", naming.GPU_RESOURCE)


def apply(
    component: v1beta1.Component, graph_env: Sequence[EnvVar] | None
) -> tuple[v1beta1.Component, dict[str, str]]:
    """The component with the config applied (replicas, container ``main``'s resources),
    and env values to replace (name -> value). The validate stage has checked the config
    (``legacyconfig.checks``): a problem here is reported at the service's ``envs``."""
    if not _names_config(component, graph_env):
        return component, {}
    from .. import legacyconfig  # its models cost start-up time: only for a config

    found = legacyconfig.find(component, graph_env)
    if found is None:
        return component, {}
    try:
        config = legacyconfig.parse(found.raw)
    except legacyconfig.ConfigError as exc:
        raise ComponentError(("envs",), exc.messages[0]) from None
    service = component.name
    overrides: dict[str, str] = {}
    if component.type == naming.FRONTEND:
        entry = config.data.get(service)
        if not isinstance(entry, dict):
            entry = config.data.get(naming.FRONTEND)
        if isinstance(entry, dict):
            entry["port"] = FRONTEND_PORT
            # Go's json.Marshal: sorted keys, no spaces
            overrides[ENV_NAME] = json.dumps(config.data, sort_keys=True, separators=(",", ":"))
    args = config.args(service)
    if args is None:
        return component, overrides
    data: dict[str, Any] | None = None
    if args.workers is not None and component.replicas is None:
        data = component.model_dump(exclude_unset=True)
        data["replicas"] = args.workers
    if args.resources is not None:
        wrong = next(legacyconfig.resource_problems(service, args.resources, config.data), None)
        if wrong is not None:
            raise ComponentError(("envs",), wrong)
        data = data if data is not None else component.model_dump(exclude_unset=True)
        current = main_container_data(component).get("resources") or {}
        _write_main_resources(data, current, legacyconfig.resource_values(args.resources))
    if data is None:
        return component, overrides
    return v1beta1.Component.model_validate(data), overrides


def _names_config(component: v1beta1.Component, graph_env: Sequence[EnvVar] | None) -> bool:
    """Whether container ``main``'s env or the DGD's has an entry of that name."""
    main = main_container(component)
    envs = (*((main.env if main is not None else None) or ()), *(graph_env or ()))
    return any(e.name == ENV_NAME for e in envs)


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
