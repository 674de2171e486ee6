"""Parity with the Dynamo operator's own output (issue "1.5 parity", point 6; Grove path: issue
"1.5.1: the last mismatches").

For every file of ``conformance/operator-output`` (what the operator's reconcilers created from
an upstream example) and of ``conformance/operator-output-grove`` (the same with Grove enabled:
PodCliqueSets, their Services, RBAC and scaling adapters), dyn-gitops renders the example with
the equivalent settings and the two object sets are compared object by object, field by field,
after only the READMEs' normalizations (``support/parity.py``). Findings on the Grove path name
the example ``grove:<example>``. Every difference left must be a documented exception:
``tests/parity_exceptions.yaml`` names each with its reason (and the section of
``docs/reference-behaviour.md`` that explains it). The test fails on a difference no exception
covers, and on an exception that no longer matches anything (fixed: remove it), so the list
stays exact."""

from __future__ import annotations

import fnmatch
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.parity import OUTPUTS, Comparison, compare, label, pairs

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
EXCEPTIONS = ROOT / "tests" / "parity_exceptions.yaml"
PAIRS = [p for output in OUTPUTS for p in pairs(SHARED, output)]


@cache
def _comparison(name: str) -> Comparison:
    example, expected = next(p for p in PAIRS if label(p[1]) == name)
    return compare(example, expected)


def _exceptions() -> list[dict[str, Any]]:
    data = yaml.safe_load(EXCEPTIONS.read_text()) or []
    assert isinstance(data, list)
    return data


def _findings(c: Comparison) -> list[str]:
    return [f"{c.example}: {label}: {what}" for label, what in c.findings()]


def _covered(finding: str, exceptions: list[dict[str, Any]]) -> bool:
    return any(fnmatch.fnmatchcase(finding, pat) for e in exceptions for pat in e["findings"])


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_there_are_forty_operator_outputs_to_compare_with(output: str) -> None:
    assert len(pairs(SHARED, output)) == 40


@pytest.mark.parametrize("name", [label(p[1]) for p in PAIRS])
def test_every_difference_from_the_operator_is_a_documented_exception(name: str) -> None:
    c = _comparison(name)
    assert c.error is None, f"{name} does not render: {c.error}"
    exceptions = _exceptions()
    unexplained = [f for f in _findings(c) if not _covered(f, exceptions)]
    assert unexplained == [], "differences from the operator no exception explains"


def test_every_exception_still_matches_a_difference() -> None:
    findings = [f for _, expected in PAIRS for f in _findings(_comparison(label(expected)))]
    stale = [
        (e["reason"][:60], pat)
        for e in _exceptions()
        for pat in e["findings"]
        if not any(fnmatch.fnmatchcase(f, pat) for f in findings)
    ]
    assert stale == [], "exceptions that match nothing any more: remove them"


def test_every_exception_has_a_reason_and_a_documented_section() -> None:
    doc = (ROOT / "docs" / "reference-behaviour.md").read_text()
    for e in _exceptions():
        assert len(e["reason"]) > 20 and e["findings"]
        assert e["section"] in doc, e["section"]
