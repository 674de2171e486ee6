"""The legacy ``DYN_DEPLOYMENT_CONFIG`` env (JSON), still honoured by the operator.

For a frontend, the entry of the service (or of ``frontend``) gets ``"port": 8000``;
``ServiceArgs.workers`` sets replicas when the service sets none; ``ServiceArgs.resources``
(cpu, memory, gpu, custom) go to both requests and limits.
"""

from __future__ import annotations

import json
from typing import Any

from .. import naming
from ..models import v1beta1
from ..models.dump import dump
from ..models.v1alpha1 import ResourceItem, Resources, ServiceSpec
from ..parse import json_loads_bounded
from ..settings import RenderSettings
from ..workerhash import hub
from .context import MAIN, ComponentError
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


def apply(
    service: str, svc: ServiceSpec, component_type: str, envs: list[dict[str, Any]]
) -> tuple[ServiceSpec, dict[str, str]]:
    """The service with the config applied, and env values to replace (name -> value)."""
    raw = next((e.get("value") for e in envs if e.get("name") == ENV_NAME), None)
    if raw is None:
        return svc, {}
    try:
        config = json_loads_bounded(raw, max_depth=CONFIG_MAX_DEPTH)
    except ValueError as exc:
        raise ComponentError(("envs",), f"{ENV_NAME} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ComponentError(("envs",), f"{ENV_NAME} must be a JSON object keyed by service")
    overrides: dict[str, str] = {}
    if component_type == naming.FRONTEND:
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
        return svc, overrides
    update: dict[str, Any] = {}
    workers = _get(args, "workers")
    if isinstance(workers, int) and svc.replicas is None:
        update["replicas"] = workers
    res = _get(args, "resources")
    if isinstance(res, dict):
        fields = {
            k: str(_get(res, k)) for k in ("cpu", "memory", "gpu") if _get(res, k) is not None
        }
        custom = _get(res, "custom")
        if isinstance(custom, dict) and custom:
            fields["custom"] = {k: str(v) for k, v in custom.items()}  # type: ignore[assignment]
        current = svc.resources or Resources()

        def over(item: ResourceItem | None) -> ResourceItem:
            base = item.model_dump(exclude_none=True) if item else {}
            return ResourceItem.model_validate({**base, **fields})

        update["resources"] = Resources(
            requests=over(current.requests), limits=over(current.limits), claims=current.claims
        )
    return (svc.model_copy(update=update) if update else svc), overrides


def component(
    component: v1beta1.Component,
    before: ServiceSpec,
    after: ServiceSpec,
    *,
    alpha: bool,
) -> v1beta1.Component:
    """``component`` with what the config rewrote in ``after`` (:func:`apply`'s service):
    its ``replicas``, and its ``resources`` in container ``main``: a v1alpha1 service's
    rewritten resources converted as the conversion does (its mainContainer's still win
    key by key); a v1beta1 component's (down-converted into the dedicated fields) laid over
    container ``main``'s."""
    if after is before:
        return component
    data = component.model_dump(exclude_unset=True)
    if after.replicas != before.replicas:
        data["replicas"] = after.replicas
    if after.resources is not before.resources:
        if alpha:
            converted = hub.component_from_alpha(component.name, dump(after), defaults=False)
            main = next(
                c
                for c in converted.spec["podTemplate"]["spec"]["containers"]
                if c.get("name") == MAIN
            )
            resources: dict[str, Any] = main.get("resources") or {}
        else:
            assert after.resources is not None  # rewritten, so present
            resources = hub._resources(dump(after.resources))
        template = data.setdefault("podTemplate", {})
        pod = template.setdefault("spec", {})
        containers = pod.setdefault("containers", [])
        main_data = next((c for c in containers if c.get("name") == MAIN), None)
        if main_data is None:
            main_data = {"name": MAIN}
            containers.insert(0, main_data)
        main_data["resources"] = resources
    return v1beta1.Component.model_validate(data)
