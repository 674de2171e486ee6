"""Where the tests find the repository, its samples and the upstream conformance corpus."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
#: the upstream examples (read-only, beside the checkout)
CONFORMANCE = REPO.parent / "shared" / "conformance" / "dynamo-examples"
#: golden files other than the samples' expected.yaml (support.golden)
GOLDEN = REPO / "tests" / "golden"
