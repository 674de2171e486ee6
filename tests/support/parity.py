"""What dyn-gitops renders for an upstream example against what the Dynamo operator's own code
created from it (``conformance/operator-output``, and ``operator-output-grove`` with Grove
enabled), after only the normalizations that folder's README names: the operator's
``nvidia.com/last-applied-*`` bookkeeping and our ``dyn-gitops.io/`` annotations, the input's
non-DGD objects (cluster state there, passed through here), the ``OracleReport`` document, and
Go's encoding of an unset LeaderWorkerSet ``rolloutStrategy``. Used by the parity test and by
``bench/parity_vs_operator.py``."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dyn_gitops import context
from dyn_gitops.errors import DynGitopsError

Obj = dict[str, Any]
Key = tuple[str, str, str, str]  # group, kind, namespace, name

#: the operator-output README's operator configuration, as dyn-gitops settings
SETTINGS: dict[str, Any] = {
    "managed-replicas": False,
    "emit-source": False,
    "discovery-backend": "kubernetes",
    "lws": True,
    "dra": True,
    "grove": False,
    "operator-release": "dynamo-platform",
    "mpi-ssh-secret": "mpi-run-ssh-secret",
    "planner-rbac": True,
    "namespace": "default",
    # the oracle ran the 2a6da14c8 reconcilers without the 1.5 runtime-version admission
    # (examples use ${VERSION} and my-tag) and without the origin-version stamp (README)
    "runtime-version-admission": "lenient",
    "origin-version": "none",
}
#: ``operator-output-grove/README.md``: the same configuration with the Grove and
#: Volcano-scheduler gates on (the DGD webhook then defaults every DGD not annotated
#: ``nvidia.com/enable-grove: "false"`` to the Grove provider)
GROVE_SETTINGS: dict[str, Any] = {**SETTINGS, "grove": True, "volcano-scheduler": True}
#: each operator-output folder, with the settings equivalent to its operator configuration
OUTPUTS: dict[str, dict[str, Any]] = {
    "operator-output": SETTINGS,
    "operator-output-grove": GROVE_SETTINGS,
}
BOOKKEEPING = ("nvidia.com/last-applied-", "dyn-gitops.io/")


def key(obj: Obj, namespace: str = "") -> Key:
    """(group, kind, namespace, name); ``namespace`` for an object that names none (a
    namespaced input object is applied to the namespace the settings name)."""
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    ns = str(meta.get("namespace") or namespace)
    return group, str(obj.get("kind")), ns, str(meta.get("name"))


def normalized(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    meta = out.get("metadata") or {}
    ann = {
        k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(BOOKKEEPING)
    }
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    spec = out.get("spec") or {}
    if out.get("kind") == "LeaderWorkerSet" and spec.get("rolloutStrategy") == {"type": ""}:
        del spec["rolloutStrategy"]
    return out


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Field paths where ``a`` (ours) and ``b`` (the operator's) differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(set(a) | set(b), key=str)
            for d in differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [path or "."]


@dataclass
class Comparison:
    """One example: the operator's objects and ours, keyed alike."""

    example: str
    theirs: dict[Key, Obj]
    ours: dict[Key, Obj] = field(default_factory=dict)
    error: str | None = None

    def findings(self) -> Iterator[tuple[str, str]]:
        """(``Kind/name``, what differs): ``missing``, ``extra`` or a field path."""
        for k in sorted(set(self.ours) | set(self.theirs)):
            label = f"{k[1]}/{k[3]}"
            if k not in self.theirs:
                yield label, "extra"
            elif k not in self.ours:
                yield label, "missing"
            else:
                for path in differences(self.ours[k], self.theirs[k]):
                    yield label, path


def label(expected: Path) -> str:
    """How findings name an example: its file stem, prefixed ``grove:`` for the Grove path."""
    return ("grove:" if expected.parent.name == "operator-output-grove" else "") + expected.stem


def compare(example: Path, expected: Path, settings: dict[str, Any] | None = None) -> Comparison:
    """``settings`` default to those of ``expected``'s folder (:data:`OUTPUTS`)."""
    settings = settings or OUTPUTS.get(expected.parent.name, SETTINGS)
    theirs = {
        key(o): normalized(o)
        for o in yaml.safe_load_all(expected.read_text())
        if isinstance(o, dict) and o.get("kind") != "OracleReport"
    }
    out = Comparison(label(expected), theirs)
    inputs = [o for o in yaml.safe_load_all(example.read_text()) if isinstance(o, dict)]
    namespace = str(settings["namespace"])
    cluster_state = {key(o, namespace) for o in inputs if o.get("kind") != "DynamoGraphDeployment"}
    try:
        ctx = context.open_path(str(example), runner=context.Runner(flags=settings))
        rendered = context.render(ctx).objects
    except DynGitopsError as exc:  # reported as a finding; a crash is raised
        out.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return out
    out.ours = {
        key(o, namespace): normalized(o) for o in rendered if key(o, namespace) not in cluster_state
    }
    return out


def pairs(shared: Path, output: str = "operator-output") -> list[tuple[Path, Path]]:
    """(upstream example, the operator's output for it) for every file of ``output``, one
    of :data:`OUTPUTS`."""
    conformance = shared / "conformance"
    return [
        (conformance / "dynamo-examples" / p.name, p)
        for p in sorted((conformance / output).glob("*.yaml"))
    ]
