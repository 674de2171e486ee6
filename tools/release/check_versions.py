#!/usr/bin/env python3
"""The version is stamped once (``__version__`` in dyn_gitops/__init__.py) and spelled one way
everywhere: check every place that carries it, print it.

    python3 tools/release/check_versions.py [--root DIR] [--tag TAG]

Checked: pyproject.toml takes its version from the package; plugin.yaml and the discovery
variant (``spec.version``); the chart's ``version`` and ``appVersion``; the Helm plugin; every
ghcr.io/dyn-gitops image reference in the tracked YAML and Markdown files (tag = the version,
digests aside); no ``v<version>`` spelling in any tracked text file; with ``--tag``, the Git tag
is the version itself (the release workflow and tools/release-rehearsal.sh run this first).
Exit 0 and the version on stdout, or exit 1 with one line per disagreement (file: found vs
expected). Needs only Python and PyYAML.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

TEXT_SUFFIXES = {".yaml", ".yml", ".md", ".py", ".sh", ".toml", ".json", ".txt", ".tpl", ""}
IMAGE_REF = re.compile(r"ghcr\.io/dyn-gitops/(dyn-gitops(?:-cmp)?)(?::([\w][\w.+-]*))?")


def package_version(root: Path) -> str:
    text = (root / "dyn_gitops" / "__init__.py").read_text()
    m = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if not m:
        raise SystemExit('dyn_gitops/__init__.py: no `__version__ = "..."` line')
    return m.group(1)


def tracked(root: Path) -> list[str]:
    proc = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:  # not a Git checkout (a copied tree): every file
        return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    return [f for f in proc.stdout.split("\0") if f]


def check(root: Path, tag: str | None = None) -> tuple[str, list[str]]:
    version = package_version(root)
    errors: list[str] = []

    def expect(where: str, found: object) -> None:
        if found != version:
            errors.append(f"{where}: found {found!r}, expected {version!r}")

    pyproject = (root / "pyproject.toml").read_text()
    if 'version = { attr = "dyn_gitops.__version__" }' not in pyproject:
        errors.append("pyproject.toml: the version must come from dyn_gitops.__version__")
    for name in ("plugin.yaml", "deploy/argocd/plugin-discovery.yaml"):
        if (root / name).exists():
            expect(
                f"{name} spec.version", yaml.safe_load((root / name).read_text())["spec"]["version"]
            )
    chart = yaml.safe_load((root / "charts/dyn-gitops/Chart.yaml").read_text())
    expect("charts/dyn-gitops/Chart.yaml version", chart["version"])
    expect("charts/dyn-gitops/Chart.yaml appVersion", chart["appVersion"])
    helm_plugin = root / "charts/helm-plugin/plugin.yaml"
    if helm_plugin.exists():
        expect(
            "charts/helm-plugin/plugin.yaml version",
            yaml.safe_load(helm_plugin.read_text())["version"],
        )
    if tag is not None:
        expect("the Git tag", tag)

    wrong = re.compile(rf"(?<![\w.])v{re.escape(version)}(?![\w.-])")
    for rel in tracked(root):
        path = root / rel
        if path.suffix not in TEXT_SUFFIXES:
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if wrong.search(line):
                errors.append(f"{rel}:{n}: spells the version v{version}; write {version}")
            if path.suffix in {".yaml", ".yml", ".md"}:
                for m in IMAGE_REF.finditer(line):
                    found = m.group(2)
                    if found is not None and found != version and "<" not in line:
                        errors.append(
                            f"{rel}:{n}: image {m.group(0)}: tag {found!r}, expected {version!r}"
                        )
    return version, errors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    p.add_argument("--tag", help="the Git tag being released (must equal the version)")
    args = p.parse_args(argv)
    version, errors = check(args.root, args.tag)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(
            f"check_versions: {len(errors)} disagreement(s) with version {version}", file=sys.stderr
        )
        return 1
    print(version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
