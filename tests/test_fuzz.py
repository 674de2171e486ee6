"""Property-based fuzzing of the CLI with hostile input (issue 11, point 8).

Two generators start from the valid inputs in samples/*/input and the conformance examples:
(a) documents whose subtrees are replaced by values of the wrong type, strange strings
(``/``, ``..``, NUL, newlines, ESC, absolute paths), huge integers or deep nesting, whose
keys are deleted or added; (b) YAML text with characters inserted, deleted or duplicated and
with tags, anchors and aliases spliced in. Whatever the bytes, the CLI keeps its contract:

* exit 0 or 1 only (2 is usage, 3 a bug: neither can come from input), no traceback and
  no "internal error" on stderr, nothing on stdout unless it succeeded;
* the same input gives the same bytes (exit code, stdout, stderr) twice;
* ``--out-dir`` writes nothing outside the output directory, and nothing at all on failure.

The number of examples is fixed and the generation derandomized (no example database),
so a CI run is bounded and reproducible; a failure prints the example (and a blob for
``@reproduce_failure``). Most runs are in-process (``invoke_cli``), a few go through the real
entry point in a subprocess (``run_cli``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.cli import CliResult, invoke_cli, run_cli
from support.fuzzcontract import ABS, FUZZ, Sandbox, sandbox
from support.fuzzcontract import check_contract as contract
from support.paths import CONFORMANCE, SAMPLES

# ------------------------------------------------------------------------------ seeds
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
SETTINGS_FILE = "dyn-gitops.yaml"


def _seed_files() -> list[Path]:
    roots = sorted(SAMPLES.glob("*/input"))
    if CONFORMANCE.is_dir():
        roots.append(CONFORMANCE)
    return sorted(
        p
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and p.suffix in MANIFEST_SUFFIXES
    )


SEED_FILES = _seed_files()
SEED_TEXTS: list[tuple[str, str]] = [(p.name, p.read_text()) for p in SEED_FILES]
SEED_DOCS: list[dict[str, Any]] = [
    doc
    for p in SEED_FILES
    if p.name != SETTINGS_FILE
    for doc in yaml.safe_load_all(p.read_text())
    if isinstance(doc, dict)
]
#: a valid DGD rendered beside a mutated settings file (so the settings are really used)
COMPANION = (SAMPLES / "vllm-agg" / "input" / "vllm-agg.yaml").read_text()

# ------------------------------------------------------------------------------ values
HUGE = "HUGEINTPLACEHOLDER"  # replaced by an integer literal too long to convert
DEEP = "DEEPNESTPLACEHOLDER"  # replaced by a deeply nested flow sequence

STRANGE = [
    "/",
    "..",
    "../..",
    "../escape",
    "../../../escape",
    "a/../../b",
    "./.",
    ".",
    "-",
    "",
    " ",
    "a\x00b",
    "\x00",
    "\n",
    "a\nb: c",
    "x\nsomething.yaml:1: Fake/problem: injected",
    "\x1b[31mred\x1b[0m",
    "\r\n",
    "\t",
    "\u202etxt.exe",
    "\ufeff",
    "\\",
    "C:\\temp",
    "UPPER",
    "Mixed-Case",
    "a" * 64,
    "b" * 254,
    "c" * 300,
    "CON",
    "nul",
    "${HOME}",
    "$(rm -rf /)",
    "%2e%2e%2f",
    "*",
    "&anchor",
    "!!int",
    "{{ .Values.x }}",
    "#comment",
    "é",
    "日本",
    "x" * 10_000,
    f"{ABS}/abs",
    f"/{ABS}",
    "-9223372036854775809",
    "0x7fffffffffffffff",
    "1e309",
    "NaN",
    "true",
    "null",
    "~",
    "Kind/name",
]
strange_text = st.sampled_from(STRANGE) | st.text(max_size=20)
scalars = (
    st.none()
    | st.booleans()
    | st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63) - 1, 2**64, 10**30, 10**300])
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([HUGE, DEEP])
    | strange_text
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(strange_text | st.integers(), children, max_size=4)
    ),
    max_leaves=12,
)


# ------------------------------------------------------------------------------ (a) trees
Path_ = tuple[Any, ...]


def _paths(node: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    yield prefix
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _paths(child, (*prefix, i))


def _get(node: Any, path: Path_) -> Any:
    for step in path:
        node = node[step]
    return node


#: places where a hostile string does the most harm (file names, references)
TARGETS: list[Path_] = [
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("kind",),
    ("apiVersion",),
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "services"),
]


@st.composite
def mutated_document(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(draw(st.sampled_from(SEED_DOCS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        # most often a hostile string where file names and references come from
        op = draw(st.sampled_from(["replace", "delete", "insert", "rename", *["target"] * 3]))
        path = paths[draw(st.integers(0, len(paths) - 1))]
        if op == "target":
            path = draw(st.sampled_from(TARGETS))
            parent = doc
            for step in path[:-1]:
                child = parent.get(step) if isinstance(parent, dict) else None
                if not isinstance(child, dict):
                    child = {}
                    parent[step] = child
                parent = child
            parent[path[-1]] = draw(strange_text | values)
        elif not path:
            continue  # the root stays a mapping: wrong roots are (b)'s business
        elif op == "replace":
            _get(doc, path[:-1])[path[-1]] = draw(values)
        elif op == "delete":
            del _get(doc, path[:-1])[path[-1]]
        else:
            node = _get(doc, path)
            if isinstance(node, dict):
                key = draw(strange_text)
                if op == "rename" and node:
                    old = draw(st.sampled_from(sorted(node, key=repr)))
                    node[key] = node.pop(old)
                else:
                    node[key] = draw(values)
            elif isinstance(node, list):
                node.insert(draw(st.integers(0, len(node))), draw(values))
    return doc


def dump_document(doc: dict[str, Any], depth: int, digits: int, as_json: bool) -> str:
    if as_json:
        text = json.dumps(doc, default=str, allow_nan=True)
    else:
        text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=10**6)
    text = re.sub(rf'"?\b{HUGE}\b"?', "9" * digits, text)  # JSON quotes it: unquote
    return re.sub(rf'"?\b{DEEP}\b"?', "[" * depth + "]" * depth, text)


def documents(depths: list[int]) -> st.SearchStrategy[str]:
    return st.builds(
        dump_document,
        mutated_document(),
        depth=st.sampled_from(depths),
        digits=st.sampled_from([19, 20, 4300, 4301, 100_000]),
        as_json=st.booleans(),
    )


#: nesting that only a bug in a C extension or a recursion past the stack could turn into a
#: crash of the whole process: in-process it would kill pytest before hypothesis can print
#: the example, so the deepest inputs go through the real entry point only
DEPTHS = [1, 50, 99, 100, 101, 500, 3000]
PROCESS_DEPTHS = [*DEPTHS, 50_000, 1_000_000]


# ------------------------------------------------------------------------------ (b) text
SPLICES = [
    "!!binary ",
    "!!binary aGVsbG8=",
    "!!int abc",
    "!!int ",
    "!!float x",
    "!!bool maybe",
    "!!timestamp 2024-13-45",
    "!!null x",
    "!!str ",
    "!!map ",
    "!!seq ",
    "!!set ",
    "!!omap ",
    "!!python/object/apply:os.system ['true']",
    "!<tag:yaml.org,2002:int> x",
    "!custom ",
    "&a ",
    "*a",
    "*undefined",
    "<<: *a\n",
    "<<: [*a, *a]\n",
    "&a [*a]",
    "? ",
    ": ",
    "- ",
    "---\n",
    "...\n",
    "%YAML 1.1\n",
    "%TAG ! tag:x,2000:\n",
    "{",
    "}",
    "[",
    "]",
    "'",
    '"',
    "|\n",
    ">-\n",
    "\t",
    "\x00",
    "\x1b[2J",
    "\ufeff",
    "\r",
    "\u2028",
    "\x85",
    "#",
    "\n  - ",
    "\n    ",
    ": : :",
    "0x",
    "1e99999",
    "9" * 5000,
    "\\x00",
    "&a [1, 2]",
    "*a",
    "!!binary '@@@'",
    "!!int 0x",
    "!!int " + "9" * 5000,
    "!!float nan",
    "!!str &a x",
    '"\\x00"',
    '"\\e[31m"',
    "../../escape",
    "/etc/passwd",
    "{a: *a}",
    "[" * 150 + "]" * 150,
    "2001-02-03",
    "0o17",
    "1_000",
    "+.inf",
    "=",
    "<<",
]


@dataclass(frozen=True)
class TextEdit:
    kind: str
    at: float  # a fraction of the text length: stays meaningful whatever the seed
    length: int
    insert: str

    def apply(self, text: str) -> str:
        if self.kind == "value":  # the rest of one `key: value` line: the YAML stays valid
            spots = [m.end() for m in re.finditer(r": ", text)]
            if not spots:
                return text
            i = spots[min(len(spots) - 1, int(self.at * len(spots)))]
            end = text.find("\n", i)
            return text[:i] + self.insert + (text[end:] if end >= 0 else "")
        i = min(len(text), int(self.at * len(text)))
        if self.kind == "insert":
            return text[:i] + self.insert + text[i:]
        if self.kind == "delete":
            return text[:i] + text[i + self.length :]
        return text[:i] + text[i : i + self.length] * 2 + text[i:]  # duplicate


edits = st.builds(
    TextEdit,
    kind=st.sampled_from(["insert", "delete", "duplicate", "value", "value"]),
    at=st.floats(0, 1),
    length=st.integers(1, 200),
    insert=st.sampled_from(SPLICES) | st.text(max_size=8),
)


@st.composite
def mutated_text(draw: st.DrawFn) -> tuple[str, bytes]:
    name, text = draw(st.sampled_from(SEED_TEXTS))
    for edit in draw(st.lists(edits, min_size=1, max_size=4)):
        text = edit.apply(text)
    raw = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()) and raw:  # invalid UTF-8 too, now and then
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + raw[at:]
    return name, raw


# ------------------------------------------------------------------------------ the contract
def check_contract(
    box: Sandbox, cli: Callable[..., CliResult], extra: tuple[str, ...] = ()
) -> None:
    """The contract (:func:`support.fuzzcontract.check_contract`); a bad value in a fuzzed
    dyn-gitops.yaml is a usage error (exit 2) naming the file, as for a flag."""
    settings_fuzzed = (box.inp / SETTINGS_FILE).exists()
    contract(box, cli, extra, usage_from=SETTINGS_FILE if settings_fuzzed else None)


OUTPUT_FORMATS = st.sampled_from([(), ("--output-format", "json")])


# ------------------------------------------------------------------------------ the tests
_CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  a: "
DEEP_FLOW = _CM + "[" * 100_000 + "]" * 100_000 + "\n"
DEEP_BLOCK = _CM + "\n" + "".join("  " * i + "- \n" for i in range(1, 3000)) + "  " * 3000 + "x\n"
DEEP_JSON = (
    '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "data": '
    + '{"a": ' * 100_000
    + "1"
    + "}" * 100_000
    + "}\n"
)
DEEP_SETTINGS = "namespace: " + "[" * 100_000 + "]" * 100_000 + "\n"


@settings(FUZZ, max_examples=600)
@given(text=documents(DEPTHS), extra=OUTPUT_FORMATS)
def test_mutated_documents_keep_the_contract(text: str, extra: tuple[str, ...]) -> None:
    with sandbox() as box:
        box.write("fuzz.yaml", text.encode("utf-8", "surrogatepass"))
        check_contract(box, invoke_cli, extra)


@settings(FUZZ, max_examples=600)
@given(mutated=mutated_text(), extra=OUTPUT_FORMATS)
def test_mutated_yaml_text_keeps_the_contract(
    mutated: tuple[str, bytes], extra: tuple[str, ...]
) -> None:
    name, raw = mutated
    with sandbox() as box:
        box.write(name, raw)
        if name == SETTINGS_FILE:
            box.write("companion.yaml", COMPANION.encode())
        check_contract(box, invoke_cli, extra)


@settings(FUZZ, max_examples=5)  # plus the two explicit examples
@given(text=documents(PROCESS_DEPTHS), mutated=mutated_text())
@example(text=DEEP_FLOW, mutated=("deep.yaml", DEEP_BLOCK.encode()))
@example(text=DEEP_JSON, mutated=(SETTINGS_FILE, DEEP_SETTINGS.encode()))
def test_the_real_entry_point_keeps_the_contract(text: str, mutated: tuple[str, bytes]) -> None:
    """A few examples through the real process, the deepest nesting among them: a
    segfault or a stack overflow in C code shows only there."""
    with sandbox() as box:
        box.write("fuzz.yaml", text.encode("utf-8", "surrogatepass"))
        check_contract(box, run_cli)
    name, raw = mutated
    with sandbox() as box:
        box.write(name, raw)
        check_contract(box, run_cli)


def test_the_seeds_are_valid_and_many() -> None:
    """The generators start from valid input: otherwise they only ever fuzz the parser."""
    assert len(SEED_DOCS) >= 40 and len(SEED_TEXTS) >= 40
    assert invoke_cli("render", str(SAMPLES / "vllm-agg" / "input")).code == 0
