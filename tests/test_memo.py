"""The bounded repr-keyed memos (``dyn_gitops.memo``): results are told apart by type and
value, bounded, never keep an exception, and what one DGD does with its results never
reaches another DGD of the same run."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.paths import SAMPLES
from support.rendering import render

from dyn_gitops import keys, memo, to_v1beta1
from dyn_gitops.workerhash import hub


def counting() -> tuple[list[Any], Any]:
    calls: list[Any] = []

    @memo.by_repr
    def kind_of(value: Any) -> str:
        calls.append(value)
        if value == "boom":
            raise ValueError("boom")
        return type(value).__name__

    return calls, kind_of


def test_equal_values_of_other_types_are_other_keys() -> None:
    calls, kind_of = counting()
    values = [1, 1.0, True, "1", None, "None", [1], (1,), {"a": 1}, {"a": 1.0}, {1: "a"}]
    assert [kind_of(v) for v in values] == [type(v).__name__ for v in values]
    assert len(calls) == len(values)
    assert [kind_of(v) for v in values] == [type(v).__name__ for v in values]
    assert len(calls) == len(values)  # all kept


def test_an_exception_is_never_kept() -> None:
    calls, kind_of = counting()
    for _ in range(2):
        with pytest.raises(ValueError):
            kind_of("boom")
    assert calls == ["boom", "boom"]


def test_bounded_by_entries_key_length_and_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo, "WINDOW", 10**9)  # never stops making keys
    calls, kind_of = counting()
    for i in range(memo.ENTRIES + 1):  # one more than it holds: emptied, then kept again
        kind_of(i)
    kind_of(0)
    assert len(calls) == memo.ENTRIES + 2
    long = "x" * memo.KEY_CHARS
    kind_of(long)
    kind_of(long)
    assert calls[-2:] == [long, long]  # too long to keep
    calls.clear()
    big = [str(i) * (memo.KEY_CHARS // 2 - 10) for i in range(10)]
    n = memo.MEMO_CHARS // len(repr((big[0],))) + 1
    for i in range(n):  # more characters than a memo holds: emptied on the way
        kind_of(f"{i}-{big[i % 10]}")
    kind_of(f"0-{big[0]}")
    assert len(calls) == n + 1


def test_a_memo_that_finds_little_stops_making_keys_for_a_while() -> None:
    calls, kind_of = counting()
    for i in range(memo.WINDOW):  # all different: nothing found in a window
        kind_of(i)
    kind_of(0)
    kind_of(0)
    assert calls[-2:] == [0, 0]  # computed each time, not kept, for the next SKIP calls
    for _ in range(memo.SKIP - 2):
        kind_of("again")
    assert calls.count("again") == memo.SKIP - 2
    calls.clear()
    for _ in range(memo.WINDOW * 3):  # making keys again; found most of the time
        kind_of("again")
    assert calls == ["again"]


def test_json_results_are_fresh_for_every_caller() -> None:
    @memo.by_repr_json
    def listed(n: int) -> dict[str, Any]:
        return {"items": list(range(n))}

    first = listed(3)
    first["items"].append(99)
    second = listed(3)
    assert second == {"items": [0, 1, 2]}
    second["items"].clear()
    assert listed(3) == {"items": [0, 1, 2]}


def test_results_are_fresh_data_for_every_caller() -> None:
    spec = yaml.safe_load((SAMPLES / "vllm-disagg/input/vllm-disagg.yaml").read_text())["spec"]
    first = hub.converted(spec.get("services") or {})
    stored = to_v1beta1.as_stored(first[0].spec)
    expected = (repr(first), repr(stored))
    first[0].spec["podTemplate"]["spec"]["containers"].clear()
    first[0].alpha_labels["changed"] = "yes"
    stored.clear()
    again = hub.converted(spec.get("services") or {})
    assert (repr(again), repr(to_v1beta1.as_stored(again[0].spec))) == expected


_PROVENANCE = (keys.ANN_SOURCE_PATH, keys.ANN_SOURCE_DGD)


def _by_identity(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    out = {}
    for obj in objects:
        meta = obj["metadata"]
        ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _PROVENANCE}
        out[(obj["kind"], meta.get("namespace", ""), meta["name"])] = {
            **obj,
            "metadata": {**meta, "annotations": ann},
        }
    return out


SAMPLE_INPUTS = sorted(
    p.parent.name
    for p in SAMPLES.glob("*/input")
    if any("DynamoGraphDeployment" in f.read_text() for f in p.glob("*.yaml"))
)


@pytest.mark.parametrize("sample", SAMPLE_INPUTS)
def test_a_twin_dgd_rendered_first_changes_nothing(sample: str, tmp_path: Path) -> None:
    """Every DGD of the sample also written under another name, in a file read first: its
    services are the same, so the original's are all taken from the memos the twin filled;
    the original's objects must be what the sample renders to alone, memos cold."""
    src = SAMPLES / sample / "input"
    memo.clear_all()
    alone = _by_identity(render(src))
    tree = tmp_path / "in"
    shutil.copytree(src, tree)
    for f in sorted(src.glob("*.yaml")):
        if f.name == "dyn-gitops.yaml":
            continue
        docs = list(yaml.safe_load_all(f.read_text()))
        twins = []
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind") == "DynamoGraphDeployment":
                doc["metadata"]["name"] += "-twin"
                twins.append(doc)
        if twins:
            (tree / f"0-twin-{f.name}").write_text(yaml.safe_dump_all(twins, sort_keys=False))
    memo.clear_all()
    both = _by_identity(render(tree))
    assert {k: both[k] for k in alone} == alone
