"""README: what the project is, the two quick-start commands, links; dated measurements live
in docs/benchmarks.md. CI runs exactly the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def _quick_start() -> list[str]:
    block = README.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_quick_start_is_two_commands() -> None:
    install, test = _quick_start()
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install .")
    assert install.endswith("dyn-gitops render samples/vllm-agg/input")
    assert test == "scripts/test"


def test_ci_runs_the_readmes_test_command() -> None:
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = [ln for ln in run.splitlines() if ln.strip() and not ln.startswith("#")]
    assert commands[-1] == _quick_start()[1]


def test_dated_measurements_are_in_docs_benchmarks() -> None:
    dated = [ln for ln in README.splitlines() if re.search(r"\b20\d\d-\d\d-\d\d\b", ln)]
    assert not dated, dated
    assert "(docs/benchmarks.md)" in README
    bench = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for kept in ("bench/render_vs_kustomize.py", "bench/parity_vs_operator.py", "4,337 s"):
        assert kept in bench, kept


def test_every_relative_link_of_the_readme_exists() -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README):
        assert (REPO / target).exists(), target
