"""support.statehistory against the real API server: every state, in etcd's order, and a
failed watch fails the wait instead of dying silently."""

from __future__ import annotations

from typing import Any

import pytest
from support.statehistory import Items, StateHistory

pytestmark = pytest.mark.realk8s


def names(items: Items) -> tuple[int, bool]:
    """(ConfigMaps, whether "last" is one of them)"""
    cms = [c["metadata"]["name"] for c in items["cms"]]
    return len(cms), "last" in cms


def test_every_state_in_order(kube: Any, namespace: str) -> None:
    """ConfigMaps created and deleted one by one, faster than a poll would see: the history
    is every count on the way, in order, and nothing else."""
    from kubernetes import client

    core = client.CoreV1Api(kube)
    listers = {"cms": lambda **kw: core.list_namespaced_config_map(namespace, **kw)}
    with StateHistory(kube, listers, names) as history:
        for i in range(6):
            core.create_namespaced_config_map(namespace, {"metadata": {"name": f"c{i}"}})
        for i in range(6):
            core.delete_namespaced_config_map(f"c{i}", namespace)
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "last"}})
        seen = history.until(lambda s: s[1], 60, "the last ConfigMap")
    counts = [0, 1, 2, 3, 4, 5, 6, 5, 4, 3, 2, 1, 0]
    assert seen == [(n, False) for n in counts] + [(1, True)]


def test_a_failed_watch_fails_the_wait(kube: Any, namespace: str) -> None:
    from kubernetes import client

    core = client.CoreV1Api(kube)

    def lister(**kw: Any) -> Any:
        if kw.get("watch"):
            raise RuntimeError("the watch broke")
        return core.list_namespaced_config_map(namespace, **kw)

    failed = pytest.raises(AssertionError, match=r"a watch failed.*the watch broke")
    with StateHistory(kube, {"cms": lister}, names) as history, failed:
        history.until(lambda s: s[1], 60, "never")
