"""What ``tools/images/build.sh`` removes: only what its own checkout made (its older keys'
images and archive), and every untagged image its run left; never another checkout's images
or the untagged images that were there before (docs/images.md, "What it removes").

podman is a stand-in here (a file-backed store: tags, untagged image ids, one untagged
stage image per build, as ``podman build --layers`` leaves one per venv stage); the real
build runs in tests/test_images.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: what build.sh reads or keys its cache on
FILES = [
    "tools/images/build.sh", "tools/images/containers.conf", "Dockerfile", ".dockerignore",
    "pyproject.toml", "README.md", "LICENSE", "plugin.yaml", "dyn_gitops/__init__.py",
]  # fmt: skip

FAKE_PODMAN = r"""#!/usr/bin/env python3
import json, os, sys
state = os.environ["FAKE_PODMAN_STATE"]
with open(state) as f:
    s = json.load(f)
args = sys.argv[1:]
code = 0
if args[:2] == ["image", "exists"]:
    code = 0 if args[2] in s["tags"] or args[2].startswith("localhost/dyn-gitops-base:") else 1
elif args[0] == "images" and "dangling=true" in args:
    print("\n".join(s["untagged"]))
elif args[0] == "images":
    print("\n".join(s["tags"]))
elif args[0] == "build":
    s["n"] += 1
    s["tags"][args[args.index("-t") + 1]] = f"image-{s['n']}"
    s["untagged"].append(f"stage-{s['n']}")
elif args[0] == "save":
    open(args[args.index("-o") + 1], "w").write("archive")
elif args[0] == "rmi":
    for item in args[1:]:
        if item in s["tags"]:
            del s["tags"][item]
        elif item in s["untagged"]:
            s["untagged"].remove(item)
        else:
            code = 1
s["calls"].append(args)
with open(state, "w") as f:
    json.dump(s, f)
sys.exit(code)
"""

OTHER = {  # another checkout's images (a worktree, a CI workspace) and an older untagged one
    "localhost/dyn-gitops:0.1.0-aaaaaaaaaaaa": "other-1",
    "localhost/dyn-gitops-cmp:0.1.0-aaaaaaaaaaaa": "other-2",
}


def _exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    checkout = tmp_path / "checkout"
    for rel in FILES:
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, checkout / rel)
    _exe(checkout / "tools" / "images" / "deps.sh", "#!/bin/sh\nexit 0\n")  # tools present
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    _exe(tmp_path / "bin" / "podman", FAKE_PODMAN)
    state = tmp_path / "podman.json"
    state.write_text(json.dumps({"tags": OTHER, "untagged": ["before"], "n": 0, "calls": []}))
    return checkout, state, tmp_path / "cache"


def _build(checkout: Path, state: Path, cache: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PATH": f"{state.parent / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "FAKE_PODMAN_STATE": str(state),
        "DYN_GITOPS_IMAGES_CACHE": str(cache),
    }
    proc = subprocess.run(
        ["bash", str(checkout / "tools" / "images" / "build.sh")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.split())


def test_a_build_removes_only_what_it_made(setup: tuple[Path, Path, Path]) -> None:
    checkout, state, cache = setup
    first = _build(checkout, state, cache)
    store = json.loads(state.read_text())
    assert set(OTHER) <= set(store["tags"]), "another checkout's images were removed"
    assert store["untagged"] == ["before"], "untagged images left (or an older one removed)"
    assert {first["cmp"], first["controller"]} <= set(store["tags"])

    (checkout / "README.md").write_text("a change: a new key\n")
    second = _build(checkout, state, cache)
    assert second["cmp"] != first["cmp"]
    store = json.loads(state.read_text())
    ours = {t for t in store["tags"] if t not in OTHER}
    assert ours == {second["cmp"], second["controller"], second["cmp"].replace("-cmp:", "-build:")}
    assert set(OTHER) <= set(store["tags"]) and store["untagged"] == ["before"]
    archives = sorted(p.name for p in cache.glob("images-*.tar"))
    assert archives == [f"images-{second['cmp'].rsplit('-', 1)[1]}.tar"]


def test_what_a_removed_checkout_made_is_removed_by_the_next_build(
    setup: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A clone or worktree deleted after its build leaves its list behind; the next build of
    any checkout removes that list's images and archive (unless a live checkout's list names
    them) instead of keeping them forever."""
    checkout, state, cache = setup
    gone = tmp_path / "gone"
    shutil.copytree(checkout, gone)
    (gone / "README.md").write_text("another key\n")
    theirs = _build(gone, state, cache)
    ours = _build(checkout, state, cache)
    store = json.loads(state.read_text())
    assert {theirs["cmp"], ours["cmp"]} <= set(store["tags"]), "a live checkout's images went"

    shutil.rmtree(gone)
    again = _build(checkout, state, cache)
    assert again == ours
    store = json.loads(state.read_text())
    assert theirs["cmp"] not in store["tags"] and theirs["controller"] not in store["tags"], (
        "the removed checkout's images are kept forever"
    )
    assert {ours["cmp"], ours["controller"]} <= set(store["tags"]) and set(OTHER) <= set(
        store["tags"]
    )
    archives = sorted(p.name for p in cache.glob("images-*.tar"))
    assert archives == [f"images-{ours['cmp'].rsplit('-', 1)[1]}.tar"]
    assert len(list(cache.glob("made-by-*.txt"))) == 1
