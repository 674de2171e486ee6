"""Property-based fuzzing of the ``nvidia.com/dgd-spec`` payload (issue 25, point 1): JSON
text inside an annotation of an otherwise valid YAML document, read by the front door like
a document (bounded, typed, refused with file:line).

The seeds are v1beta1 DGDs as the Dynamo operator stores them: each upstream example with
the spec and payload its own conversion wrote (``tests/golden/operator-conversion.json``,
``support.exported``). Two generators mutate the payload only: (a) its JSON tree, whose
subtrees (the fields the renderer reads most often) are replaced by values of the wrong
type, hostile strings, huge integers, deep nesting, lone surrogates, NaN, or are deleted,
added or renamed; (b) its JSON text, with characters inserted, deleted or duplicated and
brackets, escapes and numbers spliced in. A secret value is planted in an env var of the
payload and of container ``main``. Whatever the bytes, the CLI keeps the contract of
``support.fuzzcontract``: exit 0 or 1 only, no traceback, nothing on stdout on failure,
the same bytes twice, nothing written outside ``--out-dir``, the secret never on stderr.

The number of examples is fixed and the generation derandomized; most run in-process
(``invoke_cli``), a few through the real entry point (``run_cli``).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.cli import invoke_cli, run_cli
from support.exported import DGD_SPEC, dump, exported_with_payload, pair, payload
from support.fuzzcontract import FUZZ, check_contract, sandbox

Obj = dict[str, Any]
SECRET = "hf_PLANTEDs3cr3tVALUE0123456789"
FLAGS = ("--lws", "--dra", "--runtime-version-admission", "lenient", "--origin-version", "none")


# ------------------------------------------------------------------------------ seeds
def _planted(doc: Obj) -> Obj:
    """``doc`` with the secret in an env var of its first component's container ``main``
    and of the payload's first service (where the conversion keeps ``envs``)."""
    doc = copy.deepcopy(doc)
    first = doc["spec"]["components"][0]
    pod = first.setdefault("podTemplate", {}).setdefault("spec", {})
    containers = pod.setdefault("containers", [])
    main = next((c for c in containers if c.get("name") == "main"), None)
    if main is None:
        main = {"name": "main"}
        containers.append(main)
    main.setdefault("env", []).append({"name": "HF_TOKEN", "value": SECRET})
    kept = json.loads(doc["metadata"]["annotations"][DGD_SPEC])
    services = kept["spec"].setdefault("services", {})
    name = sorted(services)[0] if services else first["name"]
    services.setdefault(name, {}).setdefault("envs", []).append(
        {"name": "DB_PASSWORD", "value": SECRET}
    )
    doc["metadata"]["annotations"][DGD_SPEC] = json.dumps(kept, separators=(",", ":"))
    return doc


SEEDS: list[Obj] = [_planted(d) for d in exported_with_payload()]


def _payload_of(doc: Obj) -> Any:
    return json.loads(doc["metadata"]["annotations"][DGD_SPEC])


# ------------------------------------------------------------------------------ values
HUGE = "HUGEINTPLACEHOLDER"  # an integer literal too long to convert
DEEP = "DEEPNESTPLACEHOLDER"  # deeply nested brackets
LONE = "LONESURROGATEPLACEHOLDER"  # a \ud800 escape inside a string

STRANGE = [
    "",
    " ",
    "a b",
    "-x",
    "x-",
    "UPPER",
    "a/b/c",
    "Bad_Prefix/key",
    "x" * 64,
    "y" * 254,
    "é",
    "日本",
    "\x00",
    "\n",
    "x\nfile.yaml:1: Fake/problem: injected",
    "\x1b[31mred\x1b[0m",
    "\u202etxt",
    "../escape",
    "/etc/passwd",
    "${HOME}",
    "prefill",
    "decode",
    "1.5.1",
    "0.5",
    "-1",
    "8Gi",
    "x y",
    f"{LONE}",
    f"a{LONE}b",
    "9" * 30,
]
strange_text = st.sampled_from(STRANGE) | st.text(max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.sampled_from([0, -1, 1, 2**31, 2**63, 2**64, 10**30, 10**300])
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([HUGE, DEEP])
    | strange_text
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(strange_text, children, max_size=4)
    ),
    max_leaves=10,
)

#: the fields the renderer reads from the payload, per service (and its graph-level ones)
SERVICE_FIELDS = [
    ("labels",),
    ("labels", "team"),
    ("annotations",),
    ("annotations", "note"),
    ("dynamoNamespace",),
    ("subComponentType",),
    ("envFromSecret",),
    ("extraPodSpec",),
    ("extraPodSpec", "mainContainer"),
    ("extraPodSpec", "mainContainer", "envFrom"),
    ("ingress",),
    ("ingress", "labels"),
    ("volumeMounts",),
    ("resources",),
    ("envs",),
]
GRAPH_FIELDS = [("version",), ("spec",), ("spec", "pvcs"), ("spec", "services")]


# ------------------------------------------------------------------------------ (a) trees
Path_ = tuple[Any, ...]


def _paths(node: Any, prefix: Path_ = ()) -> list[Path_]:
    out = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            out.extend(_paths(child, (*prefix, key)))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out.extend(_paths(child, (*prefix, i)))
    return out


def _set(root: Any, path: Path_, value: Any) -> None:
    """Set ``path`` in ``root``, making mappings on the way (a non-mapping is replaced)."""
    node = root
    for step in path[:-1]:
        child = node.get(step) if isinstance(node, dict) else None
        if not isinstance(child, dict):
            child = {}
            node[step] = child
        node = child
    node[path[-1]] = value


def _mutate_tree(draw: st.DrawFn, tree: Any) -> None:
    paths = _paths(tree)
    op = draw(st.sampled_from(["replace", "delete", "insert", "rename", *["target"] * 4]))
    if op == "target":
        spec = tree.get("spec")
        found = spec.get("services") if isinstance(spec, dict) else None
        services = sorted(found, key=repr) if isinstance(found, dict) else []
        if draw(st.booleans()) or not services:
            where: Path_ = draw(st.sampled_from(GRAPH_FIELDS))
        else:
            service = draw(st.sampled_from(services))
            where = ("spec", "services", service, *draw(st.sampled_from(SERVICE_FIELDS)))
        _set(tree, where, draw(values))
        return
    path = paths[draw(st.integers(0, len(paths) - 1))]
    if not path:
        return  # the root stays a mapping: (b) breaks that
    parent: Any = tree
    for step in path[:-1]:
        parent = parent[step]
    if op == "replace":
        parent[path[-1]] = draw(values)
    elif op == "delete":
        del parent[path[-1]]
    elif isinstance(parent[path[-1]], dict):
        node = parent[path[-1]]
        key = draw(strange_text)
        if op == "rename" and node:
            node[key] = node.pop(draw(st.sampled_from(sorted(node, key=repr))))
        else:
            node[key] = draw(values)
    elif isinstance(parent[path[-1]], list):
        parent[path[-1]].insert(draw(st.integers(0, len(parent[path[-1]]))), draw(values))


def _text(tree: Any, depth: int, digits: int) -> str:
    text = json.dumps(tree, separators=(",", ":"), allow_nan=True, default=str)
    text = re.sub(rf'"?\b{HUGE}\b"?', "9" * digits, text)  # unquoted: a number
    text = re.sub(rf'"?\b{DEEP}\b"?', "[" * depth + "]" * depth, text)
    return text.replace(LONE, "\\ud800")  # inside its string: a JSON escape


@st.composite
def mutated_tree(draw: st.DrawFn) -> Obj:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    tree = _payload_of(doc)
    for _ in range(draw(st.integers(1, 3))):
        _mutate_tree(draw, tree)
    depth = draw(st.sampled_from([1, 50, 99, 100, 101, 250, 3_000]))
    digits = draw(st.sampled_from([19, 20, 4_300, 4_301, 20_000]))
    doc["metadata"]["annotations"][DGD_SPEC] = _text(tree, depth, digits)
    return doc


# ------------------------------------------------------------------------------ (b) text
SPLICES = [
    "[" * 300,
    "]" * 300,
    '{"a":' * 200,
    "\\ud800",
    "\\udfff",
    '"\\ud83d"',
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e999",
    "9" * 5_000,
    "0." + "0" * 5_000 + "1",
    '"',
    "\\",
    "\\u",
    "\\x00",
    "\x00",
    "}",
    "]",
    "{",
    "[",
    ",",
    ":",
    "null",
    "true",
    "{}",
    "[]",
    '"version":2,',
    '"version":"1",',
    '"spec":null,',
    '"pvcs":5,',
    '"labels":"x",',
    '"dynamoNamespace":{},',
    '"subComponentType":[],',
    '"extraPodSpec":"x",',
    '"mainContainer":[],',
    '"x":1,',
    f'"{"k" * 64}":"v",',
    "\u2028",
    "\ufeff",
]


@dataclass(frozen=True)
class TextEdit:
    kind: str
    at: float  # a fraction of the text length: meaningful whatever the seed
    length: int
    insert: str

    def apply(self, text: str) -> str:
        i = min(len(text), int(self.at * len(text)))
        if self.kind == "insert":
            return text[:i] + self.insert + text[i:]
        if self.kind == "delete":
            return text[:i] + text[i + self.length :]
        if self.kind == "after-brace":  # a member spliced into an object: stays JSON more often
            j = text.find("{", i)
            return text if j < 0 else text[: j + 1] + self.insert + text[j + 1 :]
        return text[:i] + text[i : i + self.length] * 2 + text[i:]  # duplicate


edits = st.builds(
    TextEdit,
    kind=st.sampled_from(["insert", "delete", "duplicate", "after-brace", "after-brace"]),
    at=st.floats(0, 1),
    length=st.integers(1, 40),
    insert=st.sampled_from(SPLICES) | st.text(max_size=6),
)


@st.composite
def mutated_text(draw: st.DrawFn) -> Obj:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    text = doc["metadata"]["annotations"][DGD_SPEC]
    for edit in draw(st.lists(edits, min_size=1, max_size=3)):
        text = edit.apply(text)
    doc["metadata"]["annotations"][DGD_SPEC] = text
    return doc


# ------------------------------------------------------------------------------ the tests
def _write(box: Any, doc: Obj, as_json: bool) -> None:
    text = json.dumps(doc) if as_json else dump(doc)  # both escape what YAML cannot carry
    box.write("dgd.json" if as_json else "dgd.yaml", text.encode("utf-8", "surrogatepass"))


def _check(doc: Obj, as_json: bool, cli: Any, extra: tuple[str, ...] = ()) -> None:
    with sandbox() as box:
        _write(box, doc, as_json)
        first = check_contract(box, cli, (*FLAGS, *extra), secrets=(SECRET,))
        if first.code == 1:  # refused: the payload problem names the annotation's line
            assert "dgd." in first.stderr


OUTPUT_FORMATS = st.sampled_from([(), ("--output-format", "json")])


@settings(FUZZ, max_examples=150)
@given(doc=mutated_tree(), as_json=st.booleans(), extra=OUTPUT_FORMATS)
def test_mutated_payload_trees_keep_the_contract(
    doc: Obj, as_json: bool, extra: tuple[str, ...]
) -> None:
    _check(doc, as_json, invoke_cli, extra)


@settings(FUZZ, max_examples=150)
@given(doc=mutated_text(), as_json=st.booleans(), extra=OUTPUT_FORMATS)
def test_mutated_payload_text_keeps_the_contract(
    doc: Obj, as_json: bool, extra: tuple[str, ...]
) -> None:
    _check(doc, as_json, invoke_cli, extra)


DEEP_PAYLOAD = '{"version":1,"spec":{"pvcs":' + "[" * 100_000 + "]" * 100_000 + "}}"
SURROGATE = payload({"services": {"VllmWorker": {"labels": {"team": LONE}}}}).replace(
    LONE, "\\ud800"
)


@settings(FUZZ, max_examples=4)  # plus the explicit examples
@given(tree=mutated_tree(), text=mutated_text())
@example(tree=pair(DEEP_PAYLOAD), text=pair(SURROGATE))
def test_the_real_entry_point_keeps_the_contract(tree: Obj, text: Obj) -> None:
    """A few examples through the real process, the deepest nesting among them: a crash
    of the decoder or the interpreter shows only there."""
    _check(tree, False, run_cli)
    _check(text, True, run_cli)


def test_the_seeds_are_valid_and_many() -> None:
    """The generators start from DGDs that render: otherwise they only fuzz the refusal
    of the first field. The planted secret is rendered in container ``main``'s env, and
    the payload keeps it."""
    assert len(SEEDS) >= 20
    for doc in SEEDS:
        with sandbox() as box:
            box.write("dgd.yaml", dump(doc).encode())
            res = invoke_cli("render", str(box.inp), *FLAGS)
        assert res.code == 0, res.stderr[-3000:]
        assert SECRET in res.stdout and SECRET not in res.stderr
