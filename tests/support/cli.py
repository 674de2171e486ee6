"""The ``dyn-gitops`` CLI for tests: in-process (fast) or as the real entry point in a
subprocess; both without the caller's ``DYN_GITOPS_*`` environment."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(
    *args: str, stdin: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> CliResult:
    """Run the real ``dyn-gitops`` entry point in a subprocess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", "from dyn_gitops.oneshot import main; main()", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=120,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def invoke_cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> CliResult:
    """The CLI in-process (fast); only the DYN_GITOPS_* variables given in ``env`` are set.
    ``run_cli`` runs the real entry point in a subprocess."""
    from click.testing import CliRunner

    from dyn_gitops.cli import main

    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("DYN_GITOPS_")}
    clean.update(env or {})
    res = CliRunner().invoke(main, list(args), input=stdin, env=clean)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"the CLI raised {res.exception!r}") from res.exception
    return CliResult(res.exit_code, res.stdout, res.stderr)
