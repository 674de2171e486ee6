"""Conformance over the upstream Dynamo examples in ``CONFORMANCE``.

Every example must render: multinode ones with the setting lws, GPU-memory-service ones
with the setting dra (without it each is refused with a clear error). Examples using
features the renderer does not render yet go in ``EXPECTED_UNSUPPORTED`` (empty now); they
must fail with exit 1 and say "not yet supported". The lists are exact: a new example, or a
change in what renders, fails a test here, so that they (and the product's promise that
every example renders) are revisited.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import invoke_cli
from support.conformance import (
    EXAMPLES,
    EXPECTED_UNSUPPORTED,
    NEEDS_DRA,
    NEEDS_LWS,
    PASSTHROUGH_ONLY,
    RENDERABLE,
    WARNINGS,
)
from support.paths import CONFORMANCE
from support.rendering import AS_APPLIED_FLAGS

from dyn_gitops import keys


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def test_corpus_is_present_and_the_lists_are_current() -> None:
    assert len(EXAMPLES) >= 40, f"conformance corpus missing or incomplete: {CONFORMANCE}"
    stale = sorted(set(EXPECTED_UNSUPPORTED) - set(EXAMPLES))
    assert not stale, f"listed as unsupported but not in the corpus: {stale}"
    assert set(EXAMPLES) >= PASSTHROUGH_ONLY | NEEDS_LWS | NEEDS_DRA


@pytest.mark.parametrize("name", RENDERABLE)
def test_example_renders(name: str) -> None:
    path = CONFORMANCE / name
    flags = [*(["--lws"] if name in NEEDS_LWS else []), *(["--dra"] if name in NEEDS_DRA else [])]
    res = invoke_cli("render", *AS_APPLIED_FLAGS, *flags, str(path))
    assert res.code == 0, f"{name} must render:\n{res.stderr}"
    assert "problem" not in res.stderr, res.stderr
    warned = sorted(ln.split(": ")[2] for ln in res.stderr.splitlines() if ln.endswith("(warning)"))
    assert warned == WARNINGS.get(name, []), res.stderr
    out = [o for o in yaml.safe_load_all(res.stdout) if o is not None]
    assert out, "rendered nothing"
    dgds = [d for d in documents(path) if d.get("kind") == "DynamoGraphDeployment"]
    for dgd in dgds:
        dgd_name = dgd["metadata"]["name"]
        deployments = [
            o
            for o in out
            if o["kind"] == "Deployment"
            and o["metadata"]["labels"].get(keys.LABEL_GRAPH_NAME) == dgd_name
        ]
        services = dgd["spec"].get("services") or {  # v1beta1: a list of components
            c["name"]: c for c in dgd["spec"]["components"]
        }
        multinode = [
            n for n, s in services.items() if (s.get("multinode") or {}).get("nodeCount", 1) > 1
        ]
        assert (name in NEEDS_LWS) == bool(multinode), name
        assert len(deployments) == len(services) - len(multinode), (
            f"DGD {dgd_name}: {len(services)} services but {len(deployments)} Deployments"
        )
        lws = {
            o["metadata"]["labels"][keys.LABEL_COMPONENT]
            for o in out
            if o["kind"] == "LeaderWorkerSet"
            and o["metadata"]["labels"][keys.LABEL_GRAPH_NAME] == dgd_name
        }
        assert lws == set(multinode), f"DGD {dgd_name}: LeaderWorkerSets for {lws}"
        gms = sorted(
            f"{dgd_name}-{n.lower()}-gpu"
            for n, s in services.items()
            if (s.get("gpuMemoryService") or {}).get("enabled")
        )
        assert (name in NEEDS_DRA) == bool(gms), name
        rcts = sorted(
            o["metadata"]["name"]
            for o in out
            if o["kind"] == "ResourceClaimTemplate"
            and (o["metadata"].get("annotations") or {})
            .get(keys.ANN_SOURCE_DGD, "")
            .endswith(f"/{dgd_name}")
        )
        assert rcts == gms, f"DGD {dgd_name}: ResourceClaimTemplates {rcts}, GMS services {gms}"
        assert any(
            o["kind"] == "DynamoGraphDeployment" and o["metadata"]["name"] == dgd_name for o in out
        ), f"source DGD {dgd_name} not emitted"
    # every non-Dynamo document in the file passes through unchanged
    for doc in documents(path):
        if not doc["apiVersion"].startswith("nvidia.com/"):
            assert doc in out, f"{doc['kind']}/{doc['metadata']['name']} did not pass through"


def _assert_refused(name: str, reason: str, word: str) -> None:
    res = invoke_cli("render", *AS_APPLIED_FLAGS, str(CONFORMANCE / name))
    assert res.code == 1, f"{name} ({reason}): exit {res.code}\n{res.stderr[:2000]}"
    assert res.stdout == ""
    refusals = [
        ln
        for ln in res.stderr.splitlines()
        if ln.startswith(f"{name}:") and "not yet supported" in ln
    ]
    assert refusals, f"{name} ({reason}): no 'not yet supported' problem:\n{res.stderr}"
    assert any(word in ln for ln in refusals), (
        f"{name} should be refused for {reason}:\n{res.stderr}"
    )
    assert all("DynamoGraphDeployment/" in ln for ln in refusals), res.stderr


def test_listed_examples_are_refused_as_not_yet_supported() -> None:
    # one test over the list (not one per entry: an empty list would be a skipped test)
    for name, (reason, word) in sorted(EXPECTED_UNSUPPORTED.items()):
        _assert_refused(name, reason, word)
    assert not EXPECTED_UNSUPPORTED, "every example renders: keep it that way"


@pytest.mark.parametrize("name", sorted(PASSTHROUGH_ONLY))
def test_dynamo_model_passes_through_unchanged(name: str) -> None:
    res = invoke_cli("render", *AS_APPLIED_FLAGS, str(CONFORMANCE / name))
    assert res.code == 0, res.stderr
    out = [o for o in yaml.safe_load_all(res.stdout) if o is not None]
    assert out == documents(CONFORMANCE / name)


@pytest.mark.parametrize("name", sorted(NEEDS_LWS))
def test_multinode_example_without_lws_is_a_clear_error(name: str) -> None:
    res = invoke_cli("render", *AS_APPLIED_FLAGS, str(CONFORMANCE / name))
    assert res.code == 1 and res.stdout == ""
    assert any(
        ln.startswith(f"{name}:")
        and "multinode.nodeCount" in ln
        and "set the setting lws to true" in ln
        for ln in res.stderr.splitlines()
    ), res.stderr


@pytest.mark.parametrize("name", sorted(NEEDS_DRA))
def test_gms_example_without_dra_is_a_clear_error(name: str) -> None:
    res = invoke_cli("render", *AS_APPLIED_FLAGS, str(CONFORMANCE / name))
    assert res.code == 1 and res.stdout == ""
    assert any(
        ln.startswith(f"{name}:")
        and ".gpuMemoryService: " in ln
        and "set the setting dra to true" in ln
        for ln in res.stderr.splitlines()
    ), res.stderr
