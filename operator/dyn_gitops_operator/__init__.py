"""dyn-gitops companion controller: the runtime-only half of dyn-gitops.

It never renders. It reads what the renderer put in the cluster and owns only the fields of
the ownership table in ``docs/operator.md``: DGD and DGDSA status, ``spec.replicas`` of
Deployments behind a scaling adapter or rendered with managed replicas, old worker
generations during a managed rolling update, the ``nvidia.com/restartAt`` pod-template
annotation, the namespace-scope lease and the leader-election lease.
"""

from __future__ import annotations

from dyn_gitops import __version__
from dyn_gitops.keys import CONTROLLER_FIELD_MANAGER as FIELD_MANAGER

__all__ = ["FIELD_MANAGER", "__version__"]
