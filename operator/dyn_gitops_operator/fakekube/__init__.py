"""An in-memory API server for the ``KubeApi`` verbs: fast, deterministic tests of the
reconcilers (and of code built on this package) without etcd and kube-apiserver.

    kube = FakeKube()                        # the controller's client (its field manager)
    gitops = kube.as_manager("argocd-controller")
    gitops.apply(DEPLOYMENTS, rendered)      # server-side apply, as a GitOps tool does

Like the real API server (``tests/test_operator_fakekube.py`` runs the same checks against
kube-apiserver):

- one resourceVersion counter for every object; a write that changes nothing (object and
  managed fields) keeps it; ``generation`` starts at 1 and grows when anything but
  metadata (and status, where it is a subresource) changes;
- errors as the same classes: NotFoundError (404, also for a resource that is not
  ``served``), ConflictError (409: stale resourceVersion, failed delete preconditions,
  AlreadyExists, an apply conflict without force), InvalidError (422: an update without
  resourceVersion where the real server requires one; 400: a bad selector; 415: apply to
  ``/scale``), GoneError (410: a watch from before ``server.compact()``);
- server-side apply with field managers: create-or-merge (maps key by key, map lists item
  by item), the fields a manager stops applying are removed unless another manager owns
  them, conflicts with other managers' differing values (taken over with force, the
  default), ``managedFields`` in the real ``fieldsV1`` format (keyed items as
  ``k:{"name":...}`` with ``.``, atomic lists as one leaf); updates, merge patches and
  ``/scale`` take over the fields they change;
- the status subresource (the main resource ignores ``status``, ``/status`` everything
  else) and the scale subresource (``spec.replicas``; status replicas and selector);
- label selectors (``=``, ``==``, ``!=``, ``in``, ``notin``, ``k``, ``!k``), field selectors
  on ``metadata.name`` / ``metadata.namespace``; watches from a resourceVersion, with
  ADDED / DELETED when an object enters or leaves the selector.

Simpler than the real server (so a test must not rely on these):

- no schemas: nothing is validated (an apply of a partial object to a missing name creates
  it, where the real server answers 422 for, say, a Deployment without a selector) and
  nothing is defaulted except a Deployment's ``spec.replicas`` (1) and rolling-update
  strategy (25 % / 25 %);
- list types come from ``rules`` (``KindRules.lists``): ownerReferences keyed by uid,
  the pod template lists of Deployments and LeaderWorkerSets, the PodCliqueSet's
  ``cliques`` (``PCS_MAP_LIST``, or ``PCS_ATOMIC_LIST`` as an old Grove); every other list
  is atomic. Maps never get a ``.`` entry in ``fieldsV1`` (the real server adds one in
  free-form parts of a schema and in Update entries);
- deletion is immediate (no finalizers, no garbage collector for ownerReferences), lists
  come in one page, no admission, no RBAC, timestamps from ``clock`` (by default one
  second later at every reading).
"""

from __future__ import annotations

from dyn_gitops_operator.fakekube.client import FakeKube
from dyn_gitops_operator.fakekube.rules import (
    DEFAULT_RULES,
    PCS_ATOMIC_LIST,
    PCS_MAP_LIST,
    KindRules,
)
from dyn_gitops_operator.fakekube.server import FakeApiServer, TickingClock

__all__ = [
    "DEFAULT_RULES",
    "PCS_ATOMIC_LIST",
    "PCS_MAP_LIST",
    "FakeApiServer",
    "FakeKube",
    "KindRules",
    "TickingClock",
]
