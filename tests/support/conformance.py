"""The conformance corpus's lists (tests/test_conformance.py checks they are exact; other
test modules skip or mark what does not render with the default settings)."""

from __future__ import annotations

from support.paths import CONFORMANCE

#: file -> (reason, a word the error message must contain to show it is that reason);
#: empty: every example renders
EXPECTED_UNSUPPORTED: dict[str, tuple[str, str]] = {}

#: multinode services: rendered on the LeaderWorkerSet path (setting lws); without it, refused
NEEDS_LWS = {
    "examples__backends__sglang__deploy__disagg-multinode.yaml",
    "examples__backends__trtllm__deploy__disagg-multinode.yaml",
    "examples__backends__trtllm__deploy__v1beta1__disagg-multinode.yaml",
    "examples__backends__vllm__deploy__disagg-multinode.yaml",
    "recipes__deepseek-r1__sglang__disagg-16gpu__deploy.yaml",
    "recipes__deepseek-v32-fp4__trtllm__agg-round-robin__deploy.yaml",
}

#: gpuMemoryService (and failover): rendered with DRA (setting dra); without it, refused
NEEDS_DRA = {
    "examples__backends__vllm__deploy__agg_failover.yaml",
    "examples__backends__vllm__deploy__agg_gms.yaml",
}

#: what does not render with the default settings (other test modules skip these)
NOT_RENDERED_BY_DEFAULT = frozenset(EXPECTED_UNSUPPORTED) | NEEDS_LWS | NEEDS_DRA

#: rendered with warnings (file -> the fields warned about): a docs snippet whose services
#: set no image; the API server refuses its Deployments (test_conformance_dryrun.py)
WARNINGS = {
    "docs__pages__kubernetes__autoscaling.md__scaling-adapter-snippet.yaml": [
        f"spec.services.{s}.extraPodSpec.mainContainer.image" for s in ("Frontend", "decode")
    ]
}

#: not a DGD: passes through unchanged
PASSTHROUGH_ONLY = {"examples__backends__vllm__deploy__lora__lora-model.yaml"}

EXAMPLES = sorted(p.name for p in CONFORMANCE.glob("*.yaml"))
RENDERABLE = [n for n in EXAMPLES if n not in EXPECTED_UNSUPPORTED]
