"""A DGD document's one typed form (``hubform.Graph``) as validate builds it, without the
rules: for tests that read the form, the worker hash or the emitted v1beta1 DGD of a
document directly."""

from __future__ import annotations

from typing import Any

from dyn_gitops import hubform
from dyn_gitops.models import v1alpha1, v1beta1
from dyn_gitops.models.versions import V1BETA1

Obj = dict[str, Any]


def form_of(doc: Obj) -> hubform.Graph:
    """The form of the DGD document ``doc`` (v1alpha1 or v1beta1), its model validated."""
    spec = doc.get("spec") or {}
    if doc.get("apiVersion") == V1BETA1:
        graph, problems = hubform.of_v1beta1(
            v1beta1.DynamoGraphDeployment.model_validate(doc), spec
        )
        assert problems == [], problems
        return graph
    return hubform.of_v1alpha1(v1alpha1.DynamoGraphDeployment.model_validate(doc), spec)


def stored_v1beta1(doc: Obj) -> Obj:
    """The v1alpha1 DGD document ``doc`` as the operator's conversion webhook stores it."""
    return form_of(doc).as_v1beta1(doc.get("metadata") or {})


def components_of(doc: Obj) -> hubform.GraphComponents:
    """The typed v1beta1 components of the DGD document ``doc`` (its form's)."""
    return form_of(doc).components
