"""The one bridge from the v1beta1 expansion to the modules that still read the v1alpha1
model: GMS and failover (:mod:`.gms`), checkpoint (:mod:`.checkpoint`), provider overrides
(:mod:`.provider_override`), the legacy ``DYN_DEPLOYMENT_CONFIG`` (:mod:`.legacy`) and the
elastic-EP admission check (:mod:`.elastic_ep`).

The expansion (:mod:`.graph`, :mod:`.grove`, :mod:`.objects`) reads the v1beta1 model
(:class:`.components.Graph`); these modules are handed the validated v1alpha1 DGD (a
v1beta1 DGD's down-conversion, ``models/convert.py``) here and nowhere else, and
``ComponentContext.spec`` (the v1alpha1 service :func:`.gms.apply` reads) is filled from
:meth:`Bridge.service` / :meth:`Bridge.legacy`. When those modules read the v1beta1 model,
this module and that field go (``docs/reference-behaviour.md``, *The internal model*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Problem
from ..merge import merge_envs
from ..models import v1beta1
from ..models.dump import dump
from ..models.v1alpha1 import DynamoGraphDeployment, ServiceSpec
from ..settings import RenderSettings
from . import checkpoint, elastic_ep, gms, legacy, provider_override

Obj = dict[str, Any]


@dataclass(frozen=True)
class Bridge:
    """The validated v1alpha1 DGD, for the modules not migrated yet."""

    dgd: DynamoGraphDeployment

    def service(self, name: str) -> ServiceSpec:
        """The v1alpha1 service of the component ``name`` (``ComponentContext.spec``)."""
        return (self.dgd.spec.services or {})[name]

    def problems(self, on_grove: bool) -> list[Problem]:
        """Admission's elastic-EP command check and the provider-override checks."""
        return [
            *elastic_ep.requires_command(self.dgd),
            *provider_override.problems(self.dgd, on_grove),
        ]

    def checkpoint_problem(self, name: str) -> Problem | None:
        """The component's enabled checkpoint, not yet supported (:mod:`.checkpoint`)."""
        cfg = self.service(name).checkpoint
        if cfg is None or not cfg.enabled:
            return None
        return checkpoint.not_supported(("spec", "services", name, "checkpoint"), cfg)

    def resource_claim_templates(self, namespace: str, settings: RenderSettings) -> list[Obj]:
        """GMS's ResourceClaimTemplates (DRA)."""
        return gms.resource_claim_templates(self.dgd, namespace, settings)

    def provider_override(self, pcs: Obj) -> Obj:
        """The PodCliqueSet with the provider overrides applied."""
        return provider_override.apply(self.dgd, pcs)

    def legacy(
        self,
        name: str,
        component_type: str,
        graph_envs: tuple[Obj, ...],
        component: v1beta1.Component,
        *,
        alpha: bool,
    ) -> tuple[ServiceSpec, v1beta1.Component, dict[str, str]]:
        """The legacy config applied to the component ``name``: its v1alpha1 service as the
        config left it (``ComponentContext.spec``), the rewritten v1beta1 component, and the
        env values the config replaces. Raises :class:`.context.ComponentError`."""
        written = self.service(name)
        svc, overrides = legacy.apply(
            name, written, component_type, merge_envs(graph_envs, dump(written.envs) or [])
        )
        return svc, legacy.component(component, written, svc, alpha=alpha), overrides


__all__ = ["Bridge"]
