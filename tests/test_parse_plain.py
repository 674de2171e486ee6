"""The parse stage builds a common document directly, from libyaml's events
(``parse._Composer._plain``) or else from its nodes (``parse._plain_data``), and leaves
everything else to PyYAML's constructor: all must give the same data and the same problems
for every input, plain or not (render speed, issue 13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support.paths import CONFORMANCE, SAMPLES

from dyn_gitops import parse
from dyn_gitops.errors import Problem
from dyn_gitops.read import SourceFile

#: documents PyYAML builds in ways a direct build could get wrong: every scalar tag and
#: spelling (YAML 1.1 booleans, octal, hex, sexagesimal, underscores, infinities), merge and
#: value keys, aliases (built once and shared), explicit tags, non-JSON values, odd keys
TRICKY = [
    "a: yes\nb: No\nc: on\nd: OFF\ne: y\nf: true\n",
    "a: 0x1F\nb: 0o17\nc: 017\nd: 1_000\ne: 1:30\nf: -0b101\ng: +12\n",
    "a: 1.5\nb: .inf\nc: -.Inf\nd: .nan\ne: 6.8523015e+5\nf: 1_0.5\ng: 190:20:30.15\n",
    "a: ~\nb: null\nc:\nd: ''\ne: \"\"\nf: Null\n",
    "a: !!str 123\nb: !!int '7'\nc: !!float '1'\nd: !!bool 'yes'\ne: !!null ''\n",
    "base: &b {x: 1, y: [1, 2]}\nderived:\n  <<: *b\n  y: 3\n",
    "list: &l [a, b]\nagain: *l\nmap: &m {k: v}\nother: *m\n",
    "a: &s text\nb: *s\n",
    "=: value key\nb: 1\n",
    "x: =\n",
    "? [a, b]\n: complex key\n",
    "? {a: 1}\n: mapping key\n",
    "1: int key\ntrue: bool key\n~: null key\n2.5: float key\n",
    "when: 2024-01-02\nat: 2001-12-14t21:59:43.10-05:00\n",
    "bin: !!binary aGVsbG8=\n",
    "s: !!set {a, b}\n",
    "o: !!omap [a: 1, b: 2]\n",
    "p: !!pairs [a: 1, a: 2]\n",
    "t: !custom x\n",
    "t: !!timestamp 2001-12-14\n",
    "big: !!int 1" + "0" * 5000 + "\n",
    "bad: !!int abc\n",
    "bad: !!float x\n",
    "empty: !!int ''\n",
    "- a\n- [b, c]\n- {d: e}\n- - nested\n",
    "plain scalar document\n",
    "'quoted' \n",
    "[1, 2, 3]\n",
    "k: |\n  block\n  text\nf: >\n  folded\n  text\n",
    'a: \'x\'\nb: "y\\tz"\nc: "\\u2028"\n',
    "seq: !!seq [a]\nmap: !!map {a: b}\nstr_key: {!!str 1: a}\n",
    "deep: " + "[" * 40 + "]" * 40 + "\n",
    "---\na: 1\n---\nb: [x]\n...\n---\n- c\n",
    "dup: 1\ndup: 2\n",
]


def _corpus(group: str) -> list[tuple[str, str]]:
    if group == "tricky":
        return [(f"tricky-{i:02d}.yaml", text) for i, text in enumerate(TRICKY)]
    root = SAMPLES if group == "samples" else CONFORMANCE
    paths = sorted(root.rglob("*.yaml")) if root.is_dir() else []
    return [(str(path.relative_to(root.parent)), path.read_text()) for path in paths]


def _parse(text: str, path: str) -> tuple[list[Any], list[Problem]]:
    problems: list[Problem] = []
    docs = parse.parse_documents(
        [SourceFile(path, text)],
        max_documents=10_000,
        max_yaml_nodes=1_000_000,
        max_depth=100,
        problems=problems,
    )
    return [(d.index, d.line, d.data) for d in docs], problems


@pytest.mark.parametrize("group", ["tricky", "samples", "examples"])
def test_direct_build_equals_pyyamls(group: str, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = _corpus(group)
    assert corpus
    fast = [_parse(text, path) for path, text in corpus]
    monkeypatch.setattr(parse._Composer, "_plain", lambda self, doc: False)
    from_nodes = [_parse(text, path) for path, text in corpus]
    monkeypatch.setattr(parse, "_plain_data", lambda loader, node: parse._NOT_PLAIN)
    for (path, text), got, got_from_nodes in zip(corpus, fast, from_nodes, strict=True):
        pyyamls = _parse(text, path)
        assert got == pyyamls, path
        assert got_from_nodes == pyyamls, path


def test_the_event_build_is_taken_for_plain_documents_only() -> None:
    """Built from the events: a plain document (its data, no node); anything else is left
    to the node path, which composes it from the events already read."""
    text = "a: [1, yes, ~, x, 1.5, 'q']\nb: {c: d}\n---\n- e\n"
    sizes = []
    for nodes in (False, True):
        loader = parse._Loader(text)
        try:
            docs = list(parse._Composer(loader, 100, 1000, nodes=nodes).documents())
        finally:
            loader.dispose()
        sizes.append([d.size for d in docs])
    assert sizes == [[13, 2], [13, 2]]  # nodes (keys too), as the node path counts them
    loader = parse._Loader(text)
    try:
        docs = list(parse._Composer(loader, 100, 1000).documents())
    finally:
        loader.dispose()
    assert [(d.node, d.data) for d in docs] == [
        (None, {"a": [1, True, None, "x", 1.5, "q"], "b": {"c": "d"}}),
        (None, ["e"]),
    ]
    left = [
        "<<: {a: 1}\n",  # merge key
        "=: v\n",  # value key
        "s: !!str x\n",  # a tag
        "a: &x 1\nb: *x\n",  # anchor and alias
        "? [a]\n: b\n",  # a key that is no scalar
        "1: a\n",  # a key that is no string
        "n: .nan\n",  # not JSON
        "n: !!int z\n",
        "dup: 1\ndup: 2\n",
        "deep: " + "[" * 5 + "]" * 5 + "\n",  # deeper than allowed below
        "many: [" + ", ".join("x" * 30) + "]\n",  # more nodes than allowed below
    ]
    for text in left:
        loader = parse._Loader(text + "---\nnext: 1\n")
        try:
            first, *rest = parse._Composer(loader, 4, 20).documents()
        finally:
            loader.dispose()
        assert first.data is parse._NOT_BUILT, text
        assert first.node is not None or first.problems, text
        if first.stop:  # too deep: the rest of the file is not read
            assert not rest, text
        else:  # the stream goes on where it was
            assert [d.data for d in rest] == [{"next": 1}], text


def test_plain_documents_take_the_direct_build() -> None:
    """The fast path is taken (not silently always falling back), and the fall-backs are
    the documents it leaves to PyYAML."""
    loader = parse._Loader("a: [1, yes, ~, x, 1.5]\nb: {c: d}\n")
    try:
        (composed,) = parse._Composer(loader, 100, 1000, nodes=True).documents()
        assert composed.node is not None
        data = parse._plain_data(loader, composed.node)
        assert data == {"a": [1, True, None, "x", 1.5], "b": {"c": "d"}}
    finally:
        loader.dispose()
    for text in ("<<: {a: 1}\n", "s: !!set {a}\n", "t: !x y\n", "? [a]\n: b\n", "n: !!int z\n"):
        loader = parse._Loader(text)
        try:
            (composed,) = parse._Composer(loader, 100, 1000, nodes=True).documents()
            assert composed.node is not None
            assert parse._plain_data(loader, composed.node) is parse._NOT_PLAIN, text
        finally:
            loader.dispose()


def test_aliased_documents_are_built_by_pyyaml_and_share_as_it_does(tmp_path: Path) -> None:
    """An alias is one object in PyYAML's result (built once): the same here."""
    (data,), problems = _parse("a: &x {k: [1]}\nb: *x\n", "f.yaml")
    assert not problems
    assert data[2]["a"] is data[2]["b"]
    assert data[2] == yaml.load("a: &x {k: [1]}\nb: *x\n", Loader=parse._Loader)
