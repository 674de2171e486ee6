"""Same Git tree + same settings => byte-identical output, whatever the file names, the file
order, the document order, the hash seed or the time zone.

Inputs: the conformance examples that render (grouped so that no two examples in one run
define the same object) and every ``samples/*/input``. Each is copied into a temporary tree
with its documents shuffled, or split into one file per document under other names (so that
the walk visits them in another order). The only thing allowed to change is the
``dyn-gitops.io/source-path`` annotation, which names the input files; it is mapped back to
the original names and the output re-emitted, then compared byte for byte.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.conformance import NOT_RENDERED_BY_DEFAULT
from support.paths import CONFORMANCE, SAMPLES
from support.rendering import AS_APPLIED_FLAGS, render_stdout

from dyn_gitops import keys
from dyn_gitops.emit import render_text
from dyn_gitops.settings import SETTINGS_FILE

FORMATS = ["yaml", "json"]


def parse(text: str, fmt: str) -> list[dict[str, Any]]:
    if fmt == "json":
        doc = json.loads(text)
        assert doc["kind"] == "List"
        return list(doc["items"])
    return [o for o in yaml.safe_load_all(text) if o is not None]


def split_documents(text: str) -> list[str]:
    """The documents of a YAML stream as text (comment-only chunks dropped)."""
    chunks = re.split(r"(?m)^---[ \t]*$\n?", text)
    return [c if c.endswith("\n") else c + "\n" for c in chunks if yaml.safe_load(c) is not None]


def manifests(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.name != SETTINGS_FILE and p.suffix in (".yaml", ".yml", ".json")
    )


# ----------------------------------------------------------------------------- inputs
def conformance_groups() -> list[list[str]]:
    """Renderable examples, first-fit into groups whose top-level objects do not collide."""
    groups: list[tuple[list[str], set[tuple[str, str]]]] = []
    for path in sorted(CONFORMANCE.glob("*.yaml")):
        if path.name in NOT_RENDERED_BY_DEFAULT:
            continue
        ids = {
            (d["kind"], d["metadata"]["name"])
            for d in yaml.safe_load_all(path.read_text(encoding="utf-8"))
            if d
        }
        for names, taken in groups:
            if not ids & taken:
                names.append(path.name)
                taken |= ids
                break
        else:
            groups.append(([path.name], set(ids)))
    return [names for names, _ in groups]


GROUPS = conformance_groups()
SAMPLE_DIRS = sorted(p.parent.name for p in SAMPLES.glob("*/input") if p.is_dir())
CASES = [f"conformance-{i}" for i in range(len(GROUPS))] + [f"samples/{s}" for s in SAMPLE_DIRS]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each case as one source directory (conformance groups are copied together)."""
    out: dict[str, Path] = {}
    for i, names in enumerate(GROUPS):
        root = tmp_path_factory.mktemp(f"conformance-{i}")
        for name in names:
            shutil.copyfile(CONFORMANCE / name, root / name)
        out[f"conformance-{i}"] = root
    for s in SAMPLE_DIRS:
        out[f"samples/{s}"] = SAMPLES / s / "input"
    return out


@pytest.fixture(scope="module")
def originals(sources: dict[str, Path]) -> dict[tuple[str, str], str]:
    return {
        (case, fmt): render_stdout(*AS_APPLIED_FLAGS, str(path), "--output-format", fmt)
        for case, path in sources.items()
        for fmt in FORMATS
    }


def copy_settings(src: Path, dst: Path) -> None:
    if (src / SETTINGS_FILE).exists():
        shutil.copyfile(src / SETTINGS_FILE, dst / SETTINGS_FILE)


# ----------------------------------------------------------------------------- tests
def test_every_renderable_example_is_covered() -> None:
    covered = sorted(n for names in GROUPS for n in names)
    expected = sorted(
        p.name for p in CONFORMANCE.glob("*.yaml") if p.name not in NOT_RENDERED_BY_DEFAULT
    )
    assert covered == expected
    assert SAMPLE_DIRS, "no samples found"
    multi = [
        n
        for n in covered
        if len(split_documents((CONFORMANCE / n).read_text(encoding="utf-8"))) > 1
    ]
    assert len(multi) >= 3, f"too few multi-document examples to shuffle: {multi}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_two_processes_give_identical_bytes(
    fmt: str, sources: dict[str, Path], originals: dict[tuple[str, str], str]
) -> None:
    """Fresh processes with another hash seed and time zone; also equal to the in-process run."""
    case = "conformance-0"
    outs = [
        run_cli(
            "render",
            *AS_APPLIED_FLAGS,
            str(sources[case]),
            "--output-format",
            fmt,
            env={"PYTHONHASHSEED": seed, "TZ": tz},
        )
        for seed, tz in (("1", "UTC"), ("4242", "Asia/Kathmandu"))
    ]
    for res in outs:
        assert res.code == 0, res.stderr
    assert outs[0].stdout == outs[1].stdout
    assert outs[0].stdout == originals[(case, fmt)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", CASES)
def test_document_order_does_not_matter(
    case: str,
    fmt: str,
    sources: dict[str, Path],
    originals: dict[tuple[str, str], str],
    tmp_path: Path,
) -> None:
    src = sources[case]
    rng = random.Random(case)
    for path in manifests(src):
        docs = split_documents(path.read_text(encoding="utf-8"))
        if len(docs) > 1:
            docs.reverse()
            docs[1:] = rng.sample(docs[1:], len(docs) - 1)  # the first one stays moved
        target = tmp_path / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("---\n".join(docs), encoding="utf-8")
    copy_settings(src, tmp_path)
    assert (
        render_stdout(*AS_APPLIED_FLAGS, str(tmp_path), "--output-format", fmt)
        == originals[(case, fmt)]
    )


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", CASES)
def test_file_names_and_order_do_not_matter(
    case: str,
    fmt: str,
    sources: dict[str, Path],
    originals: dict[tuple[str, str], str],
    tmp_path: Path,
) -> None:
    """One file per document, visited in reverse order, some as .yml or JSON."""
    src = sources[case]
    docs = [
        (path.relative_to(src).as_posix(), text)
        for path in manifests(src)
        for text in split_documents(path.read_text(encoding="utf-8"))
    ]
    back: dict[str, str] = {}  # new relative path -> original relative path
    for i, (orig, text) in enumerate(docs):
        n = len(docs) - i  # later documents get names that sort first
        if i % 3 == 1:
            rel = f"d{n:03d}/obj.json"
            content = json.dumps(yaml.safe_load(text), indent=1)
        elif i % 3 == 2:
            rel = f"d{n:03d}/nested/obj.yml"
            content = text
        else:
            rel = f"d{n:03d}.yaml"
            content = text
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(content, encoding="utf-8")
        back[rel] = orig
    copy_settings(src, tmp_path)

    objects = parse(render_stdout(*AS_APPLIED_FLAGS, str(tmp_path), "--output-format", fmt), fmt)
    for obj in objects:
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        if keys.ANN_SOURCE_PATH in ann:
            new_paths = ann[keys.ANN_SOURCE_PATH].split(",")
            assert set(new_paths) <= set(back), f"source-path names unknown files: {new_paths}"
            ann[keys.ANN_SOURCE_PATH] = ",".join(sorted({back[p] for p in new_paths}))
    assert render_text(objects, fmt) == originals[(case, fmt)]


def test_source_path_names_the_input_file(originals: dict[tuple[str, str], str]) -> None:
    """The one file-name-dependent annotation is there, so the mapping above is not vacuous."""
    objects = parse(originals[("conformance-0", "yaml")], "yaml")
    paths = {
        p
        for o in objects
        for p in ((o.get("metadata") or {}).get("annotations") or {})
        .get(keys.ANN_SOURCE_PATH, "")
        .split(",")
        if p
    }
    assert paths and paths <= set(GROUPS[0])
