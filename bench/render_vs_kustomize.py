#!/usr/bin/env python3
"""Benchmark: whole-process wall time, CPU time and peak RSS of ``dyn-gitops render`` against
``kustomize build`` of the very same rendered output, measured in the same run.

    python bench/render_vs_kustomize.py [--sizes 1,100,1000] [--repeat 5] [--kustomize PATH]

Each graph has 4 services (frontend, planner, prefill and decode workers). kustomize is the
peer: a Go program doing comparable work (read YAML, build objects, write YAML) on the
rendered output. Figures are medians over --repeat runs; CPU is the child's user + sys time
and RSS its ru_maxrss (both from os.wait4). render is what the console script runs
(pyproject.toml) as ``sys.executable -c``: the real interpreter, not a pyenv shim (which
adds ~0.06 s of bash), with its bytecode cached as a pip-installed package has it (a
warm-up run writes it under a private PYTHONPYCACHEPREFIX, also when
PYTHONDONTWRITEBYTECODE is set; else every run would compile the sources).
Targets (from the render-engine issue): ratio <= 1.5 at 1 DGD (stretch 1.0), <= 1.0 at
1,000, peak RSS <= 300 MB at 1,000, time growing linearly; start-up (issue 12): CPU at
1 DGD <= 0.12 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent

GRAPH = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: graph-{i:05d}
spec:
  envs:
  - name: HF_HOME
    value: /cache/hf
  services:
    Frontend:
      componentType: frontend
      replicas: 2
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
    Planner:
      componentType: planner
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          command: [python3, -m, dynamo.planner]
    VllmPrefillWorker:
      componentType: worker
      subComponentType: prefill
      replicas: 2
      envFromSecret: hf-token-secret
      resources:
        limits:
          gpu: "1"
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen3-0.6B, --is-prefill-worker]
    VllmDecodeWorker:
      componentType: worker
      subComponentType: decode
      replicas: 4
      envFromSecret: hf-token-secret
      resources:
        limits:
          gpu: "1"
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen3-0.6B]
"""


def find_kustomize(explicit: str | None) -> str:
    for cand in (explicit, os.environ.get("KUSTOMIZE")):
        if cand:
            return cand
    try:
        bindir = subprocess.run(
            [str(REPO / "tools/test-bins/build.sh"), "--print-dir"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        path = Path(bindir.splitlines()[-1]) / "kustomize"
        if path.exists():
            return str(path)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = shutil.which("kustomize")
    if not found:
        sys.exit(
            "kustomize not found: pass --kustomize, set KUSTOMIZE, or run "
            "tools/test-bins/build.sh --only kustomize"
        )
    return found


#: whole-process CPU (user + sys) of one render of 1 DGD, in seconds (issue 12)
CPU_TARGET_1 = 0.12


class Run(NamedTuple):
    wall: float  # seconds
    rss: float  # peak RSS, MiB
    cpu: float  # user + sys seconds


def measure(
    cmd: list[str], timeout: float | None = None, env: dict[str, str] | None = None
) -> Run | None:
    """Wall time, peak RSS and CPU time of one whole process; None if it ran past
    ``timeout``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if timeout is not None and time.perf_counter() - start > timeout:
            proc.kill()
            os.wait4(proc.pid, 0)
            return None
        time.sleep(0.002)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-2000:]}")
    return Run(wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def console_script() -> str:
    """What the installed ``dyn-gitops`` runs (pyproject.toml), as ``python -c`` code."""
    with (REPO / "pyproject.toml").open("rb") as f:
        target = tomllib.load(f)["project"]["scripts"]["dyn-gitops"]
    module, func = target.split(":")
    return f"from {module} import {func}; {func}()"


def render_env(tmp: str) -> dict[str, str]:
    """The environment of the render runs: bytecode cached under ``tmp`` (see the module
    docstring)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,100,1000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kustomize", default=None)
    ap.add_argument(
        "--peer-timeout",
        type=float,
        default=600,
        help="stop a kustomize run after this many seconds and report a bound",
    )
    args = ap.parse_args()
    kustomize = find_kustomize(args.kustomize)
    render_cmd = [sys.executable, "-c", console_script()]
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="dyn-gitops-bench-") as tmp:
        env = render_env(tmp)
        package = subprocess.run(  # which dyn_gitops is measured (the cwd's comes first)
            [sys.executable, "-c", "import dyn_gitops; print(dyn_gitops.__path__[0])"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.strip()
        for n in sizes:
            src = Path(tmp) / f"in-{n}"
            src.mkdir()
            for i in range(n):
                (src / f"graph-{i:05d}.yaml").write_text(GRAPH.format(i=i))
            (src / "dyn-gitops.yaml").write_text("namespace: bench\n")
            kdir = Path(tmp) / f"k-{n}"
            kdir.mkdir()
            # unmeasured: also the warm-up that writes the bytecode
            out = subprocess.run(
                [*render_cmd, "render", str(src)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            ).stdout
            (kdir / "rendered.yaml").write_text(out)
            (kdir / "kustomization.yaml").write_text(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                "resources:\n- rendered.yaml\n"
            )
            objects = out.count("\n---\n") + 1
            r_runs: list[Run] = []
            k_runs: list[Run] = []
            timed_out = False
            for _ in range(args.repeat):  # interleaved, so load affects both alike
                run = measure([*render_cmd, "render", str(src)], env=env)
                assert run is not None
                r_runs.append(run)
                if not timed_out:
                    k = measure([kustomize, "build", str(kdir)], args.peer_timeout)
                    if k is None:
                        timed_out = True  # one bound is enough; keep measuring render
                    else:
                        k_runs.append(k)
            rw = statistics.median(r.wall for r in r_runs)
            rc = statistics.median(r.cpu for r in r_runs)
            if k_runs:
                kw, km = statistics.median(k.wall for k in k_runs), max(k.rss for k in k_runs)
                kc = statistics.median(k.cpu for k in k_runs)
            else:  # a lower bound: kustomize had not finished after --peer-timeout
                kw, km, kc = args.peer_timeout, float("nan"), float("nan")
            rows.append((n, objects, rw, max(r.rss for r in r_runs), kw, km, not k_runs, rc, kc))
    version = subprocess.run([kustomize, "version"], capture_output=True, text=True).stdout
    print(
        f"peer: kustomize {version.strip()}  python {sys.version.split()[0]}  "
        f"cpus {os.cpu_count()}  repeat {args.repeat} (median wall, max RSS, "
        "median CPU = user + sys)"
    )
    print(f"render: {sys.executable} (bytecode cached), {package}")
    print(
        f"{'DGDs':>6} {'objects':>8} {'render s':>9} {'render MiB':>11} "
        f"{'kustomize s':>12} {'kustomize MiB':>14} {'ratio':>6} {'render ms/DGD':>14} "
        f"{'render CPU s':>13} {'kustomize CPU s':>16}"
    )
    for n, objects, rw, rm, kw, km, bound, rc, kc in rows:
        ks = f">{kw:.0f}" if bound else f"{kw:.3f}"
        ratio = f"<{rw / kw:.3f}" if bound else f"{rw / kw:.2f}"
        print(
            f"{n:>6} {objects:>8} {rw:>9.3f} {rm:>11.1f} {ks:>12} {km:>14.1f} "
            f"{ratio:>6} {1000 * rw / n:>14.2f} {rc:>13.3f} {kc:>16.3f}"
        )
    by_n = {r[0]: r for r in rows}
    print("targets:")
    if 1 in by_n:
        r = by_n[1][2] / by_n[1][4]
        print(
            f"  ratio at 1 DGD     {r:.2f}  target <= 1.5 (stretch 1.0): "
            f"{'met' if r <= 1.5 else 'MISSED'}"
        )
        rc, kc = by_n[1][7], by_n[1][8]
        print(
            f"  CPU at 1 DGD       {rc:.3f} s (kustomize {kc:.3f} s)  target <= "
            f"{CPU_TARGET_1}: {'met' if rc <= CPU_TARGET_1 else 'MISSED'}"
        )
    if 1000 in by_n:
        r = by_n[1000][2] / by_n[1000][4]
        print(f"  ratio at 1000 DGDs {r:.2f}  target <= 1.0: {'met' if r <= 1.0 else 'MISSED'}")
        print(
            f"  peak RSS at 1000   {by_n[1000][3]:.0f} MiB  target <= 300: "
            f"{'met' if by_n[1000][3] <= 300 else 'MISSED'}"
        )
    if 100 in by_n and 1000 in by_n:
        per100 = (by_n[100][2] - by_n[1][2]) / 99 if 1 in by_n else by_n[100][2] / 100
        per1000 = (by_n[1000][2] - by_n[1][2]) / 999 if 1 in by_n else by_n[1000][2] / 1000
        print(
            f"  marginal ms/DGD    {1000 * per100:.2f} (100) vs {1000 * per1000:.2f} (1000): "
            f"{'linear' if per1000 <= 1.25 * per100 else 'SUPERLINEAR'}"
        )


if __name__ == "__main__":
    main()
