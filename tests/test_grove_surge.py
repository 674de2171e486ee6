"""The OnDelete surge's decision (``grove.surge_target``), pure: one step per case, and a
walk against a model of Grove's scale-out / scale-in (new pods from the current template,
scale-in by ``DeletionSorter``: not ready first, then an older template) in which the
clique never has fewer ready pods than its count and ends with new-template pods only.
The same decision against real pods: ``test_rollout_pains.py::
test_one_replica_grove_worker_update_never_has_zero_ready_pods``."""

from __future__ import annotations

from typing import Any

import pytest
from dyn_gitops_operator import grove

from dyn_gitops import keys

P = grove.CliquePods


@pytest.mark.parametrize(
    ("base", "spec", "pods", "want"),
    [
        (1, 1, P(old=0, new=1, new_ready=1), 1),  # nothing outdated
        (1, 1, P(old=1, new=0, new_ready=0), 2),  # surge
        (1, 2, P(old=1, new=0, new_ready=0), 2),  # Grove has not created it yet
        (1, 2, P(old=1, new=1, new_ready=0), 2),  # the new pod is not Ready yet
        (1, 2, P(old=1, new=1, new_ready=1), 1),  # it serves: an old one may go
        (1, 1, P(old=1, new=1, new_ready=1), 1),  # scale-in not carried out yet: no surge
        (1, 2, P(old=0, new=2, new_ready=2), 1),  # done: back to the clique's count
        (3, 4, P(old=2, new=2, new_ready=2), 3),
        (3, 4, P(old=2, new=2, new_ready=1), 4),
        (3, 3, P(old=2, new=1, new_ready=1), 4),
        (3, 6, P(old=3, new=0, new_ready=0), 4),  # scaled down meanwhile: one surge pod
        (0, 0, P(old=1, new=0, new_ready=0), 0),  # scaled to zero: nothing to keep
    ],
)
def test_surge_target(base: int, spec: int, pods: grove.CliquePods, want: int) -> None:
    assert grove.surge_target(base, spec, pods) == want


def test_clique_pods_by_template_hash() -> None:
    def pod(h: str, ready: bool, gone: bool = False) -> dict[str, object]:
        meta: dict[str, object] = {"labels": {keys.LABEL_GROVE_POD_TEMPLATE_HASH: h}}
        if gone:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        cond = {"type": "Ready", "status": "True" if ready else "False"}
        return {"metadata": meta, "status": {"conditions": [cond]}}

    pods = [pod("a", True), pod("b", True), pod("b", False), pod("b", True, gone=True)]
    assert grove.CliquePods.of(pods, "b") == grove.CliquePods(old=1, new=2, new_ready=1)


@pytest.mark.parametrize("base", [1, 2, 3])
def test_walk_never_below_the_count_and_ends_on_the_new_template(base: int) -> None:
    """Grove modelled: ``spec`` pods, each (template, ready); a scale-out adds a new
    not-ready pod, a scale-in removes not-ready pods first, then old-template ones; a new
    pod becomes ready one step after it is created."""
    pods = [("old", True)] * base
    spec, fewest = base, base
    for _ in range(10 * base + 10):
        counted = grove.CliquePods(
            old=sum(1 for t, _ in pods if t == "old"),
            new=sum(1 for t, _ in pods if t == "new"),
            new_ready=sum(1 for t, r in pods if t == "new" and r),
        )
        spec = grove.surge_target(base, spec, counted)
        pods = [(t, True) for t, _ in pods]  # what was created last step is ready now
        while len(pods) > spec:
            pods.remove(min(pods, key=lambda p: (p[1], p[0] == "new")))
        pods += [("new", False)] * (spec - len(pods))
        fewest = min(fewest, sum(r for _, r in pods))
    assert pods == [("new", True)] * base and spec == base
    assert fewest >= base


def test_expected_hash_prefers_the_podclique_label_and_trim_keeps_it() -> None:
    """The PodClique's ``grove.io/pod-template-hash`` label (set from the current template)
    wins over an update progress of an older PodCliqueSet generation; the informer's trim
    keeps that one label."""
    raw: dict[str, Any] = {
        "metadata": {
            "name": "g-0-w",
            "labels": {keys.LABEL_GROVE_POD_TEMPLATE_HASH: "new", "other": "x"},
        },
        "spec": {"replicas": 1, "podSpec": {"containers": []}},
        "status": {"updateProgress": {"podTemplateHash": "older"}, "replicas": 1},
    }
    trimmed = grove.trim(raw)
    assert trimmed["metadata"]["labels"] == {keys.LABEL_GROVE_POD_TEMPLATE_HASH: "new"}
    assert grove.expected_hash(trimmed) == "new"
    del raw["metadata"]["labels"]
    assert grove.expected_hash(grove.trim(raw)) == "older"
    assert grove.expected_hash({"status": {"currentPodTemplateHash": "cur"}}) == "cur"
    assert grove.expected_hash({}) is None


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        # the renderer's stamp: what the PodCliqueSet says, whoever chose it
        ({keys.ANN_GROVE_RENDERED_STRATEGY: "OnDelete"}, True),  # grove-safe-rollout
        (
            {
                keys.ANN_GROVE_RENDERED_STRATEGY: "OnDelete",
                keys.ANN_GROVE_UPDATE_STRATEGY: "OnDelete",
            },
            True,
        ),
        (
            {
                keys.ANN_GROVE_RENDERED_STRATEGY: "RollingRecreate",
                keys.ANN_GROVE_UPDATE_STRATEGY: "RollingRecreate",
            },
            False,
        ),
        # a DGD rendered before the stamp existed: the annotation the renderer copied
        ({keys.ANN_GROVE_UPDATE_STRATEGY: "OnDelete"}, True),
        ({keys.ANN_GROVE_UPDATE_STRATEGY: "RollingRecreate"}, False),
        ({}, False),
    ],
)
def test_on_delete_reads_what_the_podcliqueset_was_rendered_with(
    annotations: dict[str, str], want: bool
) -> None:
    """The controller replaces the pods of a graph whose PodCliqueSet says ``OnDelete``,
    whether the DGD's annotation or the renderer's setting grove-safe-rollout chose it
    (``tests/test_grove.py::test_grove_safe_rollout_renders_on_delete_by_default``)."""
    dgd: dict[str, Any] = {"metadata": {"name": "g", "annotations": annotations}}
    assert grove.on_delete(dgd) is want
