"""The contract the CLI keeps whatever bytes it is given, for the fuzz tests: exit 0 or 1
only, no traceback and no "internal error", nothing on stdout unless it succeeded, the
same bytes twice, nothing written outside ``--out-dir`` (nothing at all on failure), and
no planted secret value on stderr (a rendered object carries its env values as written;
a problem, a warning or a failed run never shows one)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings

#: derandomized, no example database, fixed counts given per test: bounded and reproducible
FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


#: in an input, replaced by an absolute path inside the sandbox (root/abs, never created)
ABS = "@ABS@"


@dataclass
class Sandbox:
    """root/abs (never created: absolute-path sentinel) and root/w/x/y/{in,out}: three
    levels of ``..`` from the output directory still land inside root, where
    :meth:`listing` looks."""

    root: Path

    @property
    def inp(self) -> Path:
        return self.root / "w" / "x" / "y" / "in"

    @property
    def out(self) -> Path:
        return self.root / "w" / "x" / "y" / "out"

    def write(self, name: str, data: bytes) -> None:
        data = data.replace(ABS.encode(), str(self.root / "abs").encode())
        self.inp.mkdir(parents=True, exist_ok=True)
        (self.inp / name).write_bytes(data)

    def listing(self) -> set[str]:
        """Every path under root except the output directory's content."""
        found = set()
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            if Path(dirpath) == self.out:
                dirnames[:] = []
                continue
            found.update(
                os.path.join(rel, n) for n in dirnames + filenames if Path(dirpath, n) != self.out
            )
        return found

    def written(self) -> str:
        """The text of everything under the output directory."""
        return "".join(
            Path(d, n).read_text(errors="replace")
            for d, _, names in os.walk(self.out)
            for n in sorted(names)
        )


@contextlib.contextmanager
def sandbox() -> Iterator[Sandbox]:
    with tempfile.TemporaryDirectory(prefix="dyn-gitops-fuzz-") as tmp:
        yield Sandbox(Path(tmp))


def broken_promises(
    res: Any, secrets: tuple[str, ...] = (), usage_from: str | None = None
) -> list[str]:
    """What a CLI result (``code``, ``stdout``, ``stderr``) breaks of the contract;
    ``usage_from``: a usage error (exit 2) naming it is kept (a bad value in a fuzzed
    ``dyn-gitops.yaml`` is one, as for a flag)."""
    out = []
    usage = usage_from is not None and res.code == 2 and usage_from in res.stderr
    if res.code not in (0, 1) and not usage:
        out.append(f"exit code {res.code}")
    if "Traceback" in res.stderr:
        out.append("a traceback on stderr")
    if "internal error" in res.stderr.lower():
        out.append("'internal error' on stderr")
    if res.code != 0 and res.stdout:
        out.append("stdout is not empty although the exit code is not 0")
    out.extend(f"a planted secret on stderr ({s[:6]}...)" for s in secrets if s in res.stderr)
    return out


def check_contract(
    box: Sandbox,
    cli: Callable[..., Any],
    extra: tuple[str, ...] = (),
    secrets: tuple[str, ...] = (),
    usage_from: str | None = None,
) -> Any:
    """Render the sandbox's input twice to stdout and once to ``--out-dir``; assert the
    contract; the first result."""
    first = cli("render", str(box.inp), *extra)
    broken = broken_promises(first, secrets, usage_from)
    assert not broken, f"{broken}; stderr: {first.stderr[-3000:]}"
    again = cli("render", str(box.inp), *extra)
    assert (again.code, again.stdout, again.stderr) == (first.code, first.stdout, first.stderr), (
        "not deterministic"
    )
    before = box.listing()
    to_dir = cli("render", str(box.inp), "--out-dir", str(box.out), *extra)
    broken = broken_promises(to_dir, secrets, usage_from)
    assert not broken, f"--out-dir: {broken}; stderr: {to_dir.stderr[-3000:]}"
    assert box.listing() == before, f"written outside --out-dir: {box.listing() - before}"
    if to_dir.code != 0:
        assert not box.out.exists() or not any(box.out.iterdir()), (
            f"a failed --out-dir run left files: {sorted(os.listdir(box.out))}"
        )
    else:
        for dirpath, _, filenames in os.walk(box.out):
            for n in filenames:
                real = os.path.realpath(os.path.join(dirpath, n))
                assert real.startswith(str(box.out.resolve()) + os.sep), real
    return first
