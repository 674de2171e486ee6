"""Start-up cost (issue 12): what one ``dyn-gitops render`` imports and which models it
builds. Structure only, never timing (``bench/render_vs_kustomize.py`` prints the figures):
a render of a v1alpha1 DGD imports no down-conversion, no CRD generation, no Git and no
workflow modules, and builds exactly the models of ``v1alpha1.PREBUILT`` and of
``v1beta1.PREBUILT`` (the internal model, ``expand/components.py``), each once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.paths import SAMPLES

#: runs what the console script runs; at exit (atexit handlers run, see oneshot.py) it
#: writes what the process imported and which of our models had a schema built
_PROBE = """
import atexit, json, sys

REPORT = sys.argv.pop(1)

def _report():
    built = set()
    for name, module in sorted(sys.modules.items()):
        if name.startswith("dyn_gitops.models."):
            for value in vars(module).values():
                if (isinstance(value, type) and value.__module__ == name
                        and value.__dict__.get("__pydantic_complete__")):
                    built.add(f"{name.rsplit('.', 1)[1]}.{value.__qualname__}")
    with open(REPORT, "w") as out:
        json.dump({"modules": sorted(sys.modules), "built": sorted(built)}, out)

atexit.register(_report)
from dyn_gitops.oneshot import main
main()
"""


def _render(tmp_path: Path, source: Path) -> dict[str, Any]:
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(report), "render", str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\nkind: DynamoGraphDeployment\n" in proc.stdout  # rendered
    data: dict[str, Any] = json.loads(report.read_text())
    return data


#: never needed to render a v1alpha1 DGD (each costs start-up time)
NOT_IMPORTED = (
    "dyn_gitops.models.convert",
    "dyn_gitops.legacyconfig",  # only for a DGD naming DYN_DEPLOYMENT_CONFIG
    "dyn_gitops.crds",
    "dyn_gitops.workflows",
    "dyn_gitops.argocd",
    "git",
    "difflib",
)


def test_render_of_a_v1alpha1_dgd_imports_only_what_it_needs(tmp_path: Path) -> None:
    modules = _render(tmp_path, SAMPLES / "vllm-disagg" / "input")["modules"]
    assert "dyn_gitops.models.v1alpha1" in modules  # the probe saw the render
    unexpected = [m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_IMPORTED)]
    assert unexpected == []


def test_render_of_a_v1alpha1_dgd_builds_the_prebuilt_models_only(tmp_path: Path) -> None:
    """A model the render validates or dumps on its own but is not in PREBUILT is built on
    first use, after the DGD's, and so builds its nested models a second time: add it to
    PREBUILT (innermost first). Every other model stays unbuilt (defer_build)."""
    from dyn_gitops.models import v1alpha1, v1beta1

    built = _render(tmp_path, SAMPLES / "vllm-disagg" / "input")["built"]
    prebuilt = {*v1alpha1.PREBUILT, *v1beta1.PREBUILT}
    assert built == sorted(f"{m.__module__.rsplit('.', 1)[1]}.{m.__qualname__}" for m in prebuilt)


def test_a_v1beta1_dgd_imports_its_models_when_present(tmp_path: Path) -> None:
    data = _render(tmp_path, SAMPLES / "v1beta1-pair" / "input")
    assert "dyn_gitops.models.v1beta1" in data["modules"]
    assert "v1beta1.DynamoGraphDeployment" in data["built"]


def test_the_written_out_object_schema_is_pydantics() -> None:
    from pydantic import TypeAdapter

    from dyn_gitops.models.k8s import OBJECT_SCHEMA

    assert TypeAdapter(dict[str, Any]).json_schema() == OBJECT_SCHEMA


def test_settings_annotations_are_not_postponed() -> None:
    """The registry reads each field's annotation as a type (no string to evaluate)."""
    from dyn_gitops.settings import REGISTRY

    assert all(isinstance(s.kind, type) for s in REGISTRY)
    assert {s.name: s.choices for s in REGISTRY if s.choices} == {
        "discovery-backend": ("kubernetes", "etcd"),
        "nvidia-objects": ("emit", "omit"),
        "source-api-version": ("v1beta1", "v1alpha1", "as-written"),
        "runtime-version-admission": ("strict", "lenient"),
        "output-format": ("yaml", "json"),
        # #10773 serviceMesh.provider, #8270 serviceMesh.istio.tlsMode
        "service-mesh": ("", "istio"),
        "istio-tls-mode": ("SIMPLE", "DISABLE", "ISTIO_MUTUAL", "MUTUAL"),
        # one owner per namespace of the objects its graphs share (docs/argocd.md)
        "namespace-shared": ("emit", "omit", "only"),
    }


def _oneshot(body: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import atexit, sys\nfrom dyn_gitops import oneshot\n"
        f"try:\n    {body}\nexcept SystemExit as exc:\n    oneshot.finish(exc)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_a_one_shot_exit_keeps_the_status_output_and_atexit_handlers() -> None:
    proc = _oneshot(
        "atexit.register(print, 'bye', file=sys.stderr); "
        "sys.stdout.write('x' * 3_000_000); sys.exit(4)"
    )
    assert (proc.returncode, len(proc.stdout), proc.stderr) == (4, 3_000_000, "bye\n")
    assert _oneshot("sys.exit()").returncode == 0


def test_a_one_shot_exit_with_a_message_is_the_interpreters() -> None:
    proc = _oneshot("sys.exit('dyn-gitops: no')")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "dyn-gitops: no\n")


def test_a_render_runs_without_the_cyclic_collector(tmp_path: Path) -> None:
    """A one-shot process (oneshot.py); the warm render server turns it back on."""
    report = tmp_path / "gc.txt"
    probe = (
        "import atexit, gc, sys\nREPORT = sys.argv.pop(1)\n"
        "atexit.register(lambda: open(REPORT, 'w').write(str(gc.isenabled())))\n"
        "from dyn_gitops.oneshot import main\nmain()\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            probe,
            str(report),
            "render",
            str(SAMPLES / "vllm-disagg" / "input"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert report.read_text() == "False"


def test_the_warm_render_server_collects_again(tmp_path: Path) -> None:
    """`dyn-gitops cmp serve` runs through the one-shot entry, but lives on."""
    code = (
        "import gc, sys; gc.disable()\nfrom dyn_gitops.argocd import server\n"
        "code = server.serve(sys.argv[1])\nprint(code, gc.isenabled())\n"
    )
    blocked = tmp_path / "file"
    blocked.write_text("")  # the socket's directory cannot be made: serve returns at once
    proc = subprocess.run(
        [sys.executable, "-c", code, str(blocked / "dir" / "render.sock")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout == "2 True\n", proc.stderr


def test_the_printable_check_is_the_original_character_class() -> None:
    """yamlout names the characters outside the class (cheap to compile): the same set."""
    import re

    from dyn_gitops.yamlout import _printable

    original = re.compile(r"^[\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*$")
    assert [
        hex(c) for c in range(0x110000) if _printable(chr(c)) != bool(original.fullmatch(chr(c)))
    ] == []
    for text in ("", "plain", "two\nlines", "caf\u00e9 \u20ac", "tab\t", "nel\x85", "\U0001f600"):
        assert _printable(text) == bool(original.fullmatch(text)), text
