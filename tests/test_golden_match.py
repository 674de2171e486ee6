"""The port of the operator's golden-manifest matcher (``tests/support/golden_match.py``):
each directive passes on what it allows and fails on what it does not.

Cases follow ``deploy/operator/internal/testing/golden/{node,match}_test.go`` and DESIGN.md
at upstream ``2a6da14c8`` (#12009).
"""

from __future__ import annotations

from typing import Any

import pytest
from support.golden_match import MatchError, compare, load_documents, match, resolve_variables


def fails(expected: str, actual: Any, variables: dict[str, str] | None = None) -> str:
    want = resolve_variables(load_documents(expected)[0], variables or {})
    with pytest.raises(MatchError) as info:
        match(want, actual)
    return str(info.value)


def passes(expected: str, actual: Any, variables: dict[str, str] | None = None) -> None:
    match(resolve_variables(load_documents(expected)[0], variables or {}), actual)


OBJ = "apiVersion: v1\nkind: ConfigMap\n"


def cm(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", **fields}


def test_mappings_are_strict_by_default() -> None:
    passes(OBJ + "data: {a: x}", cm(data={"a": "x"}))
    assert "$.data.b: unexpected field" in fails(
        OBJ + "data: {a: x}", cm(data={"a": "x", "b": "y"})
    )
    assert "$.data.a: field does not exist" in fails(OBJ + "data: {a: x}", cm(data={}))


def test_strict_false_relaxes_only_its_mapping() -> None:
    passes(OBJ + "data: {$strict: false, a: x}", cm(data={"a": "x", "b": "y"}))
    # a child mapping is strict again
    text = OBJ + "data: {$strict: false, a: {k: v}}"
    assert "$.data.a.z: unexpected field" in fails(text, cm(data={"a": {"k": "v", "z": 1}}))
    assert "must be a boolean" in fails(OBJ + 'data: {$strict: "no", a: x}', cm(data={"a": "x"}))
    # $$strict names a real field called $strict
    passes(OBJ + "data: {$$strict: x}", cm(data={"$strict": "x"}))
    assert "does not exist" in fails(OBJ + "data: {$$strict: x}", cm(data={}))


@pytest.mark.parametrize("directive", ["$ignore", "$exists"])
def test_ignore_and_exists_need_the_field(directive: str) -> None:
    passes(OBJ + f"data: {{a: {directive}}}", cm(data={"a": "anything"}))
    assert "field does not exist" in fails(OBJ + f"data: {{a: {directive}}}", cm(data={}))
    # the scalar form needs a scalar, the mapping form a mapping
    assert "node is a mapping, want a scalar" in fails(
        OBJ + f"data: {{a: {directive}}}", cm(data={"a": {"x": 1}})
    )
    passes(OBJ + f"status: {{{directive}: true}}", cm(status={"x": 1}))
    assert "expected a mapping" in fails(OBJ + f"status: {{{directive}: true}}", cm(status="s"))
    assert "field does not exist" in fails(OBJ + f"status: {{{directive}: true}}", cm())
    assert "must be true" in fails(OBJ + f"status: {{{directive}: false}}", cm(status={}))


def test_notexists() -> None:
    passes(OBJ + "status: $notexists", cm())
    passes(OBJ + "status: {$notexists: true}", cm())
    assert "$.status: field exists" in fails(OBJ + "status: $notexists", cm(status={}))
    assert "$.status: field exists" in fails(OBJ + "status: {$notexists: true}", cm(status={}))


def test_glob() -> None:
    text = OBJ + "metadata: {name: $glob:graph-decode-*}"
    passes(text, cm(metadata={"name": "graph-decode-1a2b3c4d"}))
    assert "does not match glob" in fails(text, cm(metadata={"name": "graph-frontend"}))
    assert "does not match glob" in fails(text, cm(metadata={"name": "graph-decode-a/b"}))
    assert "glob requires a string" in fails(OBJ + "spec: {n: $glob:1*}", cm(spec={"n": 12}))


def test_pattern_is_anchored() -> None:
    text = OBJ + r"data: {v: $pattern:1\.4\..*}"
    passes(text, cm(data={"v": "1.4.0-12-gabc"}))
    assert "does not match pattern" in fails(text, cm(data={"v": "v1.4.0"}))
    assert "does not match pattern" in fails(OBJ + "data: {v: $pattern:ab}", cm(data={"v": "abc"}))
    assert "pattern requires a string" in fails(OBJ + "spec: {n: $pattern:1}", cm(spec={"n": 1}))


def test_variables() -> None:
    text = OBJ + "data: {h: $var:worker-hash}"
    passes(text, cm(data={"h": "abcd1234"}), {"worker-hash": "abcd1234"})
    assert "want 'abcd1234'" in fails(text, cm(data={"h": "ffff0000"}), {"worker-hash": "abcd1234"})
    assert "requires a string" in fails(text, cm(data={"h": 1234}), {"worker-hash": "1234"})
    with pytest.raises(KeyError, match="unknown variable"):
        resolve_variables(load_documents(text)[0], {})


def test_sequences_match_in_order() -> None:
    text = OBJ + "data: {l: [a, b]}"
    passes(text, cm(data={"l": ["a", "b"]}))
    assert "$.data.l[0]: value is 'b'" in fails(text, cm(data={"l": ["b", "a"]}))
    assert "sequence has 3 entries, want 2" in fails(text, cm(data={"l": ["a", "b", "c"]}))


def test_scalars_compare_value_and_type_as_yaml_1_2() -> None:
    passes(OBJ + "data: {v: n, on: on}", cm(data={"v": "n", "on": "on"}))  # strings in YAML 1.2
    assert "value is 8000, want '8000'" in fails(OBJ + 'data: {p: "8000"}', cm(data={"p": 8000}))
    assert "want 1" in fails(OBJ + "data: {p: 1}", cm(data={"p": 1.0}))
    assert "want True" in fails(OBJ + "data: {p: true}", cm(data={"p": 1}))
    passes(OBJ + "data: {p: true, n: ~}", cm(data={"p": True, "n": None}))


def test_object_sets_per_kind() -> None:
    docs = load_documents(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {$strict: false, name: a}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {$strict: false, name: $glob:b-*}\n"
    )
    a = cm(metadata={"name": "a", "namespace": "ns"})
    b = cm(metadata={"name": "b-1", "namespace": "ns"})
    other_kind = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    assert compare(docs, [a, b, other_kind], "ns").ok  # kinds the contract omits are not checked
    assert compare(docs, [a], "ns").mismatches == ["ConfigMap ns/$glob:b-* has not appeared"]
    extra = cm(metadata={"name": "c", "namespace": "ns"})
    assert compare(docs, [a, b, extra], "ns").mismatches == ["unexpected ConfigMap ns/c is present"]
    two = cm(metadata={"name": "b-2", "namespace": "ns"})
    (only,) = compare(docs, [a, b, two], "ns").mismatches
    assert "matches 2 objects, want exactly one: b-1, b-2" in only
    # an object of another namespace is not seen
    assert not compare(docs, [a, {**b, "metadata": {"name": "b-1", "namespace": "x"}}], "ns").ok


def test_a_name_matching_object_reports_where_it_differs() -> None:
    docs = load_documents("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n")
    (only,) = compare(docs, [cm(metadata={"name": "a"}, data={"k": "w"})], "ns").mismatches
    assert only == "ConfigMap ns/a does not match ConfigMap a: $.data.k: value is 'w', want 'v'"


def test_two_documents_may_not_claim_one_object() -> None:
    docs = load_documents(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {$strict: false}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {$strict: false, name: a}\n"
    )
    (only,) = compare(docs, [cm(metadata={"name": "a"})], "ns").mismatches
    assert "and document 1 match the same object" in only


def test_documents_need_apiversion_and_kind() -> None:
    with pytest.raises(ValueError, match="kind is required"):
        load_documents("apiVersion: v1\n")
    with pytest.raises(ValueError, match="no objects"):
        load_documents("---\n")
