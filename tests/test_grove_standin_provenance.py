"""The Grove stand-ins' provenance (docs/grove-standin.md) cannot rot silently: every
behaviour a stand-in's docstring claims has its entry in the doc and every entry is
claimed, each entry cites an upstream Grove file at a full 40-hex commit (the pinned one)
and the local code it describes (which exists), and carries a verdict. Static, no cluster.
Plus the one behaviour fixed against upstream: what the pod template hash is made of."""

from __future__ import annotations

import ast
import re

import pytest
from support.paths import REPO

DOC = REPO / "docs" / "grove-standin.md"
STANDINS = (
    REPO / "tests" / "support" / "grove_standin.py",
    REPO / "tests" / "support" / "grove_graph.py",
    REPO / "operator" / "dyn_gitops_operator" / "testing.py",
)
CLAIM = re.compile(
    r"Grove behaviours modelled \(docs/grove-standin\.md\):(.*?)(?:\n\s*\n|\Z)", re.DOTALL
)
ID = re.compile(r"``([a-z0-9-]+)``")
#: an upstream reference: `path/in/grove.ext@commit` (the commit checked separately)
REF = re.compile(r"`((?:operator|docs|scheduler)/[\w./-]+\.\w+)@([0-9A-Za-z]+)`")
PINNED = re.compile(r"^## Which Grove: .*commit `([0-9a-f]{40})`", re.MULTILINE)
LOCAL = re.compile(r"`((?:tests|operator)/[\w./-]+\.py)`")


def claims() -> dict[str, set[str]]:
    """behaviour id -> the stand-in files whose docstrings (module or function) claim it."""
    out: dict[str, set[str]] = {}
    for path in STANDINS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]
        for node in nodes:
            for block in CLAIM.findall(ast.get_docstring(node) or ""):
                for name in ID.findall(block):
                    out.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return out


def entries() -> dict[str, str]:
    """behaviour id -> its entry's text (the ``### `id` `` headings under "## Behaviours")."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Behaviours\n", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^### `([a-z0-9-]+)`\s*$", section, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_claimed_behaviour_has_an_entry_and_every_entry_is_claimed() -> None:
    claimed, documented = claims(), entries()
    assert claimed, "no stand-in docstring claims a behaviour"
    assert set(claimed) <= set(documented), sorted(set(claimed) - set(documented))
    assert set(documented) <= set(claimed), sorted(set(documented) - set(claimed))


def test_the_three_stand_ins_each_claim_behaviours() -> None:
    owners = set().union(*claims().values())
    assert owners == {str(p.relative_to(REPO)) for p in STANDINS}


@pytest.mark.parametrize("name", sorted(entries()))
def test_each_entry_cites_upstream_at_the_pinned_commit(name: str) -> None:
    (pinned,) = PINNED.findall(DOC.read_text(encoding="utf-8"))
    body = entries()[name]
    refs = REF.findall(body)
    assert refs, f"{name}: no upstream `path@commit` reference"
    for path, commit in refs:
        assert re.fullmatch(r"[0-9a-f]{40}", commit), f"{name}: {path}@{commit} is not 40-hex"
        assert commit == pinned, f"{name}: {path}@{commit} is not the pinned {pinned}"
        assert "/" in path and not path.startswith("/"), (name, path)
    # function names follow each file: at least one ``(`Name`...)`` group
    assert re.search(r"@[0-9a-f]{40}`\s*\(`\w", body), f"{name}: no function named"


@pytest.mark.parametrize("name", sorted(entries()))
def test_each_entry_names_existing_stand_in_code_and_a_verdict(name: str) -> None:
    body = entries()[name]
    stand_in = re.search(r"^\* \*\*Stand-in\*\*:(.*?)(?=^\* \*\*)", body, re.DOTALL | re.M)
    assert stand_in, f"{name}: no **Stand-in** item"
    local = LOCAL.findall(stand_in.group(1))
    assert local, f"{name}: the stand-in item names no file"
    for rel in local:
        assert (REPO / rel).is_file(), f"{name}: {rel} does not exist"
    verdict = re.search(r"^\* \*\*Verdict\*\*: (\w+)", body, re.M)
    assert verdict and verdict.group(1) in {"matches", "differs"}, f"{name}: verdict"


def test_the_doc_is_linked_from_the_test_binaries_and_operator_docs() -> None:
    for doc in ("test-bins.md", "operator.md"):
        assert "grove-standin.md" in (REPO / "docs" / doc).read_text(encoding="utf-8"), doc


def test_template_hash_has_groves_inputs() -> None:
    """Grove's ``ComputePCLQPodTemplateHash``: the clique template's labels, annotations and
    pod spec, with the PodCliqueSet's priorityClassName; a restart (an annotation) rolls."""
    from support.grove_standin import template_hash

    clique = {
        "name": "worker",
        "labels": {"a": "1"},
        "annotations": {"x": "1"},
        "spec": {"replicas": 1, "podSpec": {"containers": [{"name": "main", "image": "i:1"}]}},
    }
    base = template_hash(clique, None)
    restarted = {**clique, "annotations": {"x": "1", "nvidia.com/restartAt": "t"}}
    assert template_hash(restarted, None) != base
    assert template_hash(clique, "high") != base
    assert template_hash({**clique, "labels": {"a": "2"}}, None) != base
    image = {**clique["spec"], "podSpec": {"containers": [{"name": "main", "image": "i:2"}]}}
    assert template_hash({**clique, "spec": image}, None) != base
    # not an input: replicas and minAvailable (a scale is not a new template)
    scaled = {**clique, "spec": {**clique["spec"], "replicas": 3, "minAvailable": 2}}
    assert template_hash(scaled, None) == base


def test_pinned_commit_is_the_tag_the_dynamo_operator_requires() -> None:
    """The doc names the version and the commit together (a bump must change both)."""
    text = DOC.read_text(encoding="utf-8")
    assert "`github.com/ai-dynamo/grove/operator/api v0.1.0-alpha.12-rc1`" in text
    assert PINNED.findall(text) == ["19905d530d48bdabe3f1de6a8a175544f941d81e"]
    assert "19905d53" in (REPO / "tests" / "support" / "grove_standin.py").read_text()
