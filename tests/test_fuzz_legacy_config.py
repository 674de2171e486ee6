"""Property-based fuzzing of the legacy ``DYN_DEPLOYMENT_CONFIG`` (issue 25, acceptance):
mutated JSON inside the env value of a valid DGD (or DCD), written in each place a component
reads it from (``support.legacy_config.CARRIERS``).

A valid config is mutated as a tree (values of the wrong type, huge and negative counts,
deep nesting, lone surrogates, strange and case-folded keys; keys deleted, added, renamed),
then as text (cut, characters spliced in). A credential is planted in another env var and
inside the config. Whatever the bytes, the CLI keeps its contract:

* exit 0 or 1 only, no traceback and no "internal error" on stderr, nothing on stdout
  unless it succeeded, the same bytes twice;
* ``--out-dir`` writes nothing outside the output directory, and nothing at all on failure;
* the planted credential is in no output of a failure, and in no message of a success;
* on success no replica count (``dyn-gitops.io/desired-replicas``, ``seed-replicas``, a
  workload's ``replicas``) is above the setting max-replicas.

The number of examples is fixed and the generation derandomized (no example database);
most runs are in-process (``invoke_cli``), a few through the real entry point (``run_cli``).
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli import CliResult, invoke_cli, run_cli
from support.fuzzcontract import FUZZ, Sandbox, check_contract, sandbox
from support.legacy_config import CARRIERS, SECRET, WORKER, dump, legacy_doc

from dyn_gitops import keys

MAX_REPLICAS = 50  # lowered by flag, so that small counts cross it too
HUGE = "HUGEINTPLACEHOLDER"  # replaced by an integer literal of many digits
DEEP = "DEEPNESTPLACEHOLDER"  # replaced by deeply nested arrays

#: a config every carrier renders with: the worker's workers and resources, a frontend
#: entry (its port is written back, every key kept) and an entry no component reads
VALID: dict[str, Any] = {
    WORKER: {
        "ServiceArgs": {
            "workers": 2,
            "resources": {"cpu": "1", "memory": "1Gi", "gpu": "1", "custom": {"a.io/x": "1"}},
        }
    },
    "Frontend": {"ServiceArgs": {"workers": 1}, "port": 1},
    "Planner": {"environment": "kubernetes", "token": SECRET},
}

COUNTS = [-(2**63), -5, -1, 0, 1, 49, 50, 51, 20_000, 2**31 - 1, 2**31, 2**63, 10**12, 10**30]
STRANGE_KEYS = [
    "",
    " ",
    "workers",
    "WORKERS",
    "wOrKeRs",
    "ServiceArgs",
    "serviceargs",
    "SERVICEARGS",
    "resources",
    "Resources",
    "custom",
    "cpu",
    "GPU",
    "frontend",
    "FRONTEND",
    "Frontend",
    WORKER,
    WORKER.lower(),
    "\u212a",  # KELVIN SIGN: folds to "k"
    "\u017f",  # LATIN SMALL LETTER LONG S: folds to "s"
    "a\x00b",
    "\n",
    "\ud800",
    "\udfff",
    "é",
    "../x",
    "nvidia.com/gpu",
    "a.io/x",
    "x" * 300,
    SECRET,
    f"{SECRET}=",
]
strange_key = st.sampled_from(STRANGE_KEYS) | st.text(max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.sampled_from(COUNTS)
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([SECRET, "1", "500m", "8Gi", "-1", "1e3", " 1", "0x10", "", "\ud800"])
    | st.sampled_from([HUGE, DEEP])
    | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(strange_key, children, max_size=3)
    ),
    max_leaves=8,
)


# ------------------------------------------------------------------------------ the tree
def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _paths(child, (*prefix, i))


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        node = node[step]
    return node


#: where a hostile value does the most harm: the counts and the quantities, whose keys
#: are also written in other cases (Go matches them case-insensitively)
TARGETS: list[tuple[str, ...]] = [
    (WORKER, "ServiceArgs", "workers"),
    (WORKER, "ServiceArgs", "resources", "cpu"),
    (WORKER, "ServiceArgs", "resources", "custom", "a.io/x"),
    (WORKER, "ServiceArgs", "resources", "custom", SECRET),
    (WORKER, "serviceARGS", "Workers"),
    (WORKER, "ServiceArgs", "RESOURCES", "Memory"),
    ("Frontend", "ServiceArgs", "workers"),
    (WORKER.lower(), "ServiceArgs", "workers"),
    (SECRET, "ServiceArgs", "workers"),
]
target_values = st.sampled_from(COUNTS) | st.sampled_from([SECRET, f"{SECRET}m", "1Gi"]) | values


def _target(draw: st.DrawFn, config: Any) -> Any:
    """A hostile value at one of :data:`TARGETS` (the mappings on the way made)."""
    if not isinstance(config, dict):
        return config
    path, parent = draw(st.sampled_from(TARGETS)), config
    for step in path[:-1]:
        if not isinstance(parent.get(step), dict):
            parent[step] = {}
        parent = parent[step]
    parent[path[-1]] = draw(target_values)
    return config


def _mutate(draw: st.DrawFn, config: Any) -> Any:
    """One change of the tree ``config`` (its root may be replaced)."""
    paths = list(_paths(config))
    path = paths[draw(st.integers(0, len(paths) - 1))]
    op = draw(
        st.sampled_from(["target"] * 4 + ["replace", "replace", "delete", "insert", "rename"])
    )
    if op == "target":
        return _target(draw, config)
    if not path:
        return draw(values) if op == "replace" else config
    parent, last = _at(config, path[:-1]), path[-1]
    node = parent[last]
    if op == "replace":
        parent[last] = draw(values)
    elif op == "delete":
        del parent[last]
    elif isinstance(node, dict) and op == "rename" and node:
        old = draw(st.sampled_from(sorted(node, key=repr)))
        node[draw(strange_key)] = node.pop(old)
    elif isinstance(node, dict):
        node[draw(strange_key)] = draw(values)
    elif isinstance(node, list):
        node.insert(draw(st.integers(0, len(node))), draw(values))
    return config


SPLICES = ["{", "}", "[", "]", '"', ",", ":", "\\", "\\ud800", "NaN", "-", "1e999", "\x00", " "]


@st.composite
def config_texts(draw: st.DrawFn) -> str:
    """A mutated config as the env value's text."""
    config: Any = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        config = _mutate(draw, config)
    text = json.dumps(config, ensure_ascii=draw(st.booleans()), allow_nan=True, default=str)
    text = text.replace(f'"{HUGE}"', "9" * draw(st.sampled_from([19, 20, 4300, 4301, 50_000])))
    depth = draw(st.sampled_from([1, 99, 100, 101, 5000]))
    text = text.replace(f'"{DEEP}"', "[" * depth + "]" * depth)
    if draw(st.integers(0, 4)) == 0:  # now and then no JSON at all
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(SPLICES) | st.just("")) + text[at + 1 :]
    return text


# ------------------------------------------------------------------------------ the contract
def _objects(res: CliResult, as_json: bool) -> list[dict[str, Any]]:
    if as_json:
        data = json.loads(res.stdout)
        return list(data.get("items", [data]) if isinstance(data, dict) else data)
    return [o for o in yaml.safe_load_all(res.stdout) if isinstance(o, dict)]


def _counts(obj: dict[str, Any]) -> list[int]:
    """Every replica count an object asks for."""
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    found = [int(ann[k]) for k in (keys.ANN_DESIRED_REPLICAS, keys.ANN_SEED_REPLICAS) if k in ann]
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("replicas"), int):
        found.append(spec["replicas"])
    return found


def _checked(box: Sandbox, cli: Callable[..., CliResult], extra: tuple[str, ...]) -> None:
    """The contract (:func:`support.fuzzcontract.check_contract`, the planted credential
    never shown), and no replica count above the ceiling when it renders."""
    flags = ("--max-replicas", str(MAX_REPLICAS), *extra)
    first = check_contract(box, cli, flags, secrets=(SECRET,))
    if first.code == 0:
        counts = [n for o in _objects(first, "json" in extra) for n in _counts(o)]
        assert all(0 <= n <= MAX_REPLICAS for n in counts), counts


def _run(text: str, carrier: str, cli: Callable[..., CliResult], extra: tuple[str, ...]) -> None:
    with sandbox() as box:
        box.write("dgd.yaml", dump(legacy_doc(text, carrier)).encode("utf-8", "surrogatepass"))
        _checked(box, cli, extra)


CARRIER = st.sampled_from(sorted(CARRIERS))
EXTRA = st.sampled_from([(), ("--output-format", "json"), ("--no-managed-replicas",)])


# ------------------------------------------------------------------------------ the tests
@settings(FUZZ, max_examples=250)
@given(text=config_texts(), carrier=CARRIER, extra=EXTRA)
def test_mutated_legacy_configs_keep_the_contract(
    text: str, carrier: str, extra: tuple[str, ...]
) -> None:
    _run(text, carrier, invoke_cli, extra)


@settings(FUZZ, max_examples=4)
@given(text=config_texts(), carrier=CARRIER)
def test_the_real_entry_point_keeps_the_contract(text: str, carrier: str) -> None:
    _run(text, carrier, run_cli, ())


def test_the_valid_config_renders_in_every_carrier() -> None:
    """The generator starts from a config that renders: otherwise it only fuzzes refusals."""
    for carrier in CARRIERS:
        _run(json.dumps(VALID), carrier, invoke_cli, ())
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "dgd.yaml").write_text(dump(legacy_doc(json.dumps(VALID), carrier)))
            res = invoke_cli("render", tmp, "--max-replicas", str(MAX_REPLICAS))
            assert res.code == 0, (carrier, res.stderr)
