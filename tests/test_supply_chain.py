"""The release's supply chain: actions pinned by commit, image dependencies from hashed lock
files, the license the metadata names, and the release workflow's test step run as the hosted
runner runs it (sudo's secure_path).

The lock files are written by ``tools/images/lock.py`` (PyPI); these checks are offline.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
#: the composite actions this repository offers (the PR preview)
ACTIONS = sorted((REPO / ".github" / "actions").glob("*/action.yml"))
DOCKERFILE = REPO / "Dockerfile"
LOCKS = REPO / "tools" / "images"
#: the sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

PINNED = re.compile(
    r"^\s*(?:- )?uses: [\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40} # v\d+\.\d+\.\d+$"
)


@pytest.mark.parametrize(
    "workflow", [*WORKFLOWS, *ACTIONS], ids=lambda p: str(p.relative_to(REPO / ".github"))
)
def test_every_action_is_pinned_by_commit_sha(workflow: Path) -> None:
    uses = [ln for ln in workflow.read_text().splitlines() if re.match(r"^\s*(- )?uses:", ln)]
    assert uses, workflow
    loose = [ln.strip() for ln in uses if not PINNED.match(ln)]
    assert not loose, "not `owner/repo@<40 hex> # vX.Y.Z`:\n" + "\n".join(loose)


# --- the images' Python dependencies -------------------------------------------------------
def _lock(name: str) -> dict[str, tuple[str, list[str]]]:
    """{name: (version, hashes)} of tools/images/requirements-<name>.txt."""
    text = (LOCKS / f"requirements-{name}.txt").read_text().replace("\\\n", " ")
    out: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        pin, *opts = line.split()
        pkg, version = pin.split("==")
        hashes = [o.removeprefix("--hash=sha256:") for o in opts]
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes) and hashes, line
        out[canonicalize_name(pkg)] = (version, hashes)
    return out


def _satisfied(requirements: list[str], lock: dict[str, tuple[str, list[str]]]) -> None:
    for raw in requirements:
        req = Requirement(raw)
        name = canonicalize_name(req.name)
        assert name in lock, f"{raw} is not in the lock (run tools/images/lock.py)"
        assert req.specifier.contains(lock[name][0], prereleases=True), (raw, lock[name][0])


def test_the_lock_files_pin_what_pyproject_requires() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    deps = project["project"]["dependencies"]
    operator = project["project"]["optional-dependencies"]["operator"]
    cmp, controller, build = _lock("cmp"), _lock("controller"), _lock("build")
    _satisfied(deps, cmp)
    _satisfied(deps + operator, controller)
    _satisfied(project["build-system"]["requires"], build)
    # the sidecar's pins are the controller's (one resolution)
    assert {n: v for n, (v, _) in cmp.items()} == {n: controller[n][0] for n in cmp}


def _runs(text: str) -> list[str]:
    """The Dockerfile's RUN instructions, continuation lines joined."""
    joined = text.replace("\\\n", " ")
    return [re.sub(r"\s+", " ", ln) for ln in joined.splitlines() if ln.startswith("RUN ")]


def test_the_images_install_only_from_the_hashed_locks() -> None:
    runs = _runs(DOCKERFILE.read_text())
    pip = [
        c for r in runs for c in r.split("&&") if re.search(r"-m pip (install|wheel|download)", c)
    ]
    assert pip
    for cmd in pip:
        if "--require-hashes" in cmd:
            assert re.search(r"-r /locks/requirements-(cmp|controller|build)\.txt", cmd), cmd
        else:  # only the package itself, without dependencies, from the build context
            assert "--no-deps" in cmd, cmd
            assert "/wheels/dyn_gitops-" in cmd or "--no-build-isolation" in cmd, cmd
    text = " ".join(pip)
    for name in ("cmp", "controller", "build"):
        assert f"--require-hashes -r /locks/requirements-{name}.txt" in text, name
    installs = [c for c in pip if "/locks/requirements-" in c and "pip install" in c]
    assert all("--require-hashes" in c for c in installs)
    assert re.search(
        r"pip download .*--require-hashes .*-r /locks/requirements-controller\.txt", text
    )


def test_the_license_is_the_one_the_metadata_names() -> None:
    text = (REPO / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == {"text": "Apache-2.0"}
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in DOCKERFILE.read_text()


# --- the test step under sudo ----------------------------------------------------------------
#: a sudo that does what the hosted runner's does: the command runs with sudoers' secure_path
#: as PATH, whatever --preserve-env says
FAKE_SUDO = """#!/bin/sh
while [ $# -gt 0 ]; do
  case $1 in --preserve-env=*|-E) shift ;; --) shift; break ;; *) break ;; esac
done
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin exec "$@"
"""
#: scripts/test, reduced to what it needs from PATH
FAKE_TEST = """#!/usr/bin/env bash
echo "python=$(command -v python)"
echo "go=$(command -v go)"
echo "ci=$CI home=$HOME"
"""


def _exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_the_test_step_keeps_setup_pythons_python_and_go_under_sudo(tmp_path: Path) -> None:
    wf = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())
    steps = wf["jobs"]["test"]["steps"]
    step = next(s for s in steps if "scripts/test" in str(s.get("run", "")))
    script = str(step["run"])
    env = {k: str(v) for k, v in (step.get("env") or {}).items()}
    setup_python = next(
        s for s in steps if str(s.get("uses", "")).startswith("actions/setup-python@")
    )
    outputs = {f"${{{{ steps.{setup_python.get('id')}.outputs.python-path }}}}": sys.executable}
    env = {k: outputs.get(v, v) for k, v in env.items()}
    assert all("${{" not in v for v in env.values()), env
    bin_dir, go_dir, work = tmp_path / "bin", tmp_path / "go" / "bin", tmp_path / "work"
    _exe(bin_dir / "sudo", FAKE_SUDO)
    _exe(go_dir / "go", "#!/bin/sh\necho go1.26\n")
    _exe(work / "scripts" / "test", FAKE_TEST)
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    proc = subprocess.run(
        ["bash", "-e", "-c", script],
        capture_output=True, text=True, cwd=work, timeout=300,
        env={**os.environ, **env, "RUNNER_TEMP": str(runner_temp), "HOME": str(tmp_path),
             "PATH": f"{bin_dir}:{go_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = dict(
        ln.split("=", 1) for ln in proc.stdout.splitlines() if ln.startswith(("python=", "go="))
    )
    # the Python of setup-python (through a venv of it), not the runner's /usr/bin one
    python = Path(found["python"])
    assert python.is_relative_to(runner_temp), proc.stdout
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert version.strip() == str(sys.version_info[:2])
    assert found["go"] == str(go_dir / "go"), proc.stdout
    assert f"ci=true home={tmp_path}" in proc.stdout
