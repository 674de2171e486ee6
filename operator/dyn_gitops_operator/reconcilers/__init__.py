"""One reconciler per concern, run in this order for every graph key.

grove_surge -> scaling_adapter -> rollout -> restart -> owner -> apply (sends their writes)
-> status
"""

from __future__ import annotations

from dyn_gitops_operator.reconcilers.apply import ApplyReconciler
from dyn_gitops_operator.reconcilers.base import Context, Reconciler
from dyn_gitops_operator.reconcilers.grove_surge import GroveSurgeReconciler
from dyn_gitops_operator.reconcilers.owner import OwnerReconciler
from dyn_gitops_operator.reconcilers.restart import RestartReconciler
from dyn_gitops_operator.reconcilers.rollout import RolloutReconciler
from dyn_gitops_operator.reconcilers.scaling import ScalingAdapterReconciler
from dyn_gitops_operator.reconcilers.status import StatusReconciler


def default_chain() -> list[Reconciler]:
    return [
        GroveSurgeReconciler(),
        ScalingAdapterReconciler(),
        RolloutReconciler(),
        RestartReconciler(),
        OwnerReconciler(),
        ApplyReconciler(),
        StatusReconciler(),
    ]


__all__ = ["Context", "Reconciler", "default_chain"]
