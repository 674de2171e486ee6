#!/usr/bin/env python3
"""Benchmark: whole-process wall time of one warm ``cmp generate`` (the image's launcher in
front of the warm render server) for a one-DGD application, against ``kustomize build`` of
the same output, measured interleaved in the same run so machine load affects both alike.

    python bench/warm_generate_vs_kustomize.py [--repeat 25] [--kustomize PATH]

Prints the medians, minimums and the ratio (target from the CMP issue: <= 1.0). It asserts
nothing: the test suite checks only that the warm answer equals the cold one
(tests/test_cmp_e2e.py::test_warm_generate_through_the_launcher_equals_the_cold_one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from render_vs_kustomize import find_kustomize

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "vllm-agg" / "input" / "vllm-agg.yaml"
ENTRY = [sys.executable, "-c", "from dyn_gitops.oneshot import main; main()"]


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=120)
    took = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.decode()[-2000:]}")
    return took


def stop_render_server(tmp: Path) -> None:
    """Remove the warm server's socket (it exits by itself); SIGTERM if it lingers."""
    for pid_file in tmp.glob("dyn-gitops-*/render-*.sock.pid"):
        pid = int(pid_file.read_text())
        pid_file.with_suffix("").unlink(missing_ok=True)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGTERM)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--kustomize", default=None)
    args = ap.parse_args()
    kustomize = find_kustomize(args.kustomize)
    with tempfile.TemporaryDirectory(prefix="dyn-gitops-bench-") as work_dir:
        work = Path(work_dir)
        app, bindir, kdir = work / "app", work / "bin", work / "kustomize"
        for d in (app, bindir, kdir):
            d.mkdir()
        shutil.copy(SAMPLE, app)
        launcher = bindir / "dyn-gitops"
        subprocess.run([*ENTRY, "cmp", "install-launcher", str(launcher)], check=True)
        tmp = Path(tempfile.mkdtemp(prefix="dgb"))  # short: the socket path has a limit
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work),
            "TMPDIR": str(tmp),
            "ARGOCD_APP_NAME": "llm",
            "ARGOCD_APP_NAMESPACE": "llm-serving",
            "ARGOCD_APP_REVISION": "0" * 40,
            "ARGOCD_APP_SOURCE_PATH": "apps/llm",
            "KUBE_VERSION": "1.31.4",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        }
        gen_cmd, k_cmd = [str(launcher), "cmp", "generate"], [kustomize, "build", "."]
        try:
            cold = subprocess.run(
                gen_cmd, cwd=app, env=env, capture_output=True, text=True, timeout=120, check=True
            )
            (kdir / "rendered.yaml").write_text(cold.stdout)
            (kdir / "kustomization.yaml").write_text("resources:\n- rendered.yaml\n")
            for _ in range(3):  # warm both (page cache, the render server's first fork)
                timed(gen_cmd, app, env)
                timed(k_cmd, kdir, env)
            gen, kus = [], []
            for _ in range(args.repeat):  # interleaved: both see the same machine load
                gen.append(timed(gen_cmd, app, env))
                kus.append(timed(k_cmd, kdir, env))
            warm = subprocess.run(gen_cmd, cwd=app, env=env, capture_output=True, text=True)
        finally:
            stop_render_server(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
    g, k = statistics.median(gen), statistics.median(kus)
    print(
        f"{len(cold.stdout)} bytes, {cold.stdout.count('apiVersion:')} objects, "
        f"median of {args.repeat}, cpus {os.cpu_count()}"
    )
    print(
        f"warm generate   {g * 1000:8.1f} ms  (min {min(gen) * 1000:.1f})  "
        f"{'served warm' if '(warm server)' in warm.stderr else 'NOT served warm'}"
    )
    print(f"kustomize build {k * 1000:8.1f} ms  (min {min(kus) * 1000:.1f})")
    print(f"ratio           {g / k:8.2f}  target <= 1.0: {'met' if g / k <= 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main()
