"""Regenerates dyn_gitops/models/crddefaults.py: the ``default:`` values of the operator's
v1beta1 DynamoGraphDeployment CRD schema (what controller-gen emits from the Go types'
``+default`` / ``+kubebuilder:default`` markers, Kubernetes' core types included), as the
skeleton of the schema that leads to them.

    python3 tools/crddefaults/generate.py /path/to/dynamo/deploy/operator [LABEL]

LABEL (e.g. the upstream commit) is written into the module's docstring. Reads
``config/crd/bases/nvidia.com_dynamographdeployments.yaml`` and checks that the v1beta1
DynamoComponentDeployment's spec has the same defaults as a DGD component (a standalone DCD
is rendered as one). A default the operator's Go round trip loses (a zero value on a
non-pointer ``omitempty`` field, e.g. ``LocalObjectReference.name: ""``) is left out: the
API server stores it, the operator decodes it into the Go type and the objects it writes
never carry it. Which fields those are comes from dyn_gitops/workerhash/golayout.py (the
operator's own types by reflection); a zero default on a field whose Go type is not known
there stops the generator. The output is committed and reviewed like code.
"""

from __future__ import annotations

import pprint
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from dyn_gitops.workerhash import golayout  # noqa: E402  (after the path)

Node = dict[str, Any]
#: the Go types of the v1beta1 DGD spec's fields that have defaults below them (the graph
#: spec itself is not in golayout; a component is the DCD spec's shared part)
GRAPH_FIELDS = {
    "components": f"slice:{golayout.ROOT}",
    "env": "slice:struct:core/v1.EnvVar",
}


def _version(crd: Node, name: str) -> Node:
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == name]
    schema: Node = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _field(gotype: str | None, name: str) -> tuple[str, bool, bool] | None:
    """(Go type, omitempty, omitzero) of field ``name`` of the struct ``gotype``."""
    if gotype is None:
        return None
    base = gotype.removeprefix("ptr:")
    if not base.startswith("struct:"):
        return None
    for fname, ftype, omitempty, omitzero in golayout.STRUCTS[base.removeprefix("struct:")]:
        if fname == name:
            return ftype, omitempty, omitzero
    raise SystemExit(f"{gotype} has no field {name!r} in golayout.py: regenerate it first")


def _element(gotype: str | None, kind: str) -> str | None:
    if gotype is None:
        return None
    base = gotype.removeprefix("ptr:")
    return base.removeprefix(f"{kind}:") if base.startswith(f"{kind}:") else None


def _lost(value: Any, field: tuple[str, bool, bool] | None, where: str) -> bool:
    """Whether the operator's Go round trip drops the default ``value``."""
    if value not in ("", False, 0, [], {}) or value is True:
        return False
    if field is None:
        raise SystemExit(f"{where}: a zero default on a field of unknown Go type")
    ftype, omitempty, omitzero = field
    return not ftype.startswith("ptr:") and (omitempty or omitzero)


def skeleton(
    schema: Node, gotype: str | None, where: str, fields: dict[str, str] | None = None
) -> Node:
    """The part of ``schema`` (of Go type ``gotype``, or with the Go types of its fields
    ``fields``) that leads to a default (``{}``: none), the zero defaults the operator loses
    left out."""
    out: Node = {}
    defaults: Node = {}
    children: Node = {}
    for name, sub in sorted((schema.get("properties") or {}).items()):
        if fields is not None:
            field = (fields[name], True, False) if name in fields else None
        else:
            field = _field(gotype, name)
        path = f"{where}.{name}"
        if "default" in sub:
            if sub.get("nullable"):
                raise SystemExit(f"{path}: a nullable field with a default")
            if isinstance(sub["default"], dict | list):  # schemadefaults shares them
                raise SystemExit(f"{path}: a default that is not a scalar")
            if not _lost(sub["default"], field, path):
                defaults[name] = sub["default"]
        child = skeleton(sub, field[0] if field else None, path)
        if child:
            children[name] = child
    if defaults:
        out["defaults"] = defaults
    if children:
        out["properties"] = children
    for key, kind in (("items", "slice"), ("additionalProperties", "map")):
        sub = schema.get(key)
        if isinstance(sub, dict):
            child = skeleton(sub, _element(gotype, kind), f"{where}[]")
            if child:
                out[key] = child
    return out


def main() -> None:
    operator = Path(sys.argv[1])
    label = sys.argv[2] if len(sys.argv) > 2 else "the release being reproduced"
    bases = operator / "config" / "crd" / "bases"
    dgd = yaml.load(
        (bases / "nvidia.com_dynamographdeployments.yaml").read_text(), yaml.CSafeLoader
    )
    dcd = yaml.load(
        (bases / "nvidia.com_dynamocomponentdeployments.yaml").read_text(), yaml.CSafeLoader
    )
    graph = skeleton(_version(dgd, "v1beta1"), None, "spec", GRAPH_FIELDS)
    component = graph["properties"]["components"]["items"]
    standalone = skeleton(_version(dcd, "v1beta1"), golayout.ROOT, "spec")
    if standalone != component:
        raise SystemExit("the DCD's spec defaults differ from a DGD component's: port them")
    target = REPO / "dyn_gitops" / "models" / "crddefaults.py"
    target.write_text(
        '"""The defaults the operator\'s v1beta1 DynamoGraphDeployment CRD schema gives, as the\n'
        "skeleton of the schema that leads to them: per object, ``defaults`` (field -> value) and\n"
        "the ``properties``, list ``items`` and map ``additionalProperties`` below it that hold\n"
        "more. Only what survives the operator's Go round trip (a zero default on a non-pointer\n"
        "``omitempty`` field is left out). Generated by ``tools/crddefaults/generate.py`` from\n"
        f'the CRD ({label}); do not edit."""\n\n'
        "from typing import Any\n\n"
        "#: the v1beta1 DGD ``spec`` (a standalone DCD's spec has its component's: checked)\n"
        f"GRAPH_SPEC: dict[str, Any] = {pprint.pformat(graph, sort_dicts=True)}\n"
    )
    subprocess.run(["ruff", "format", "--quiet", str(target)], check=True)
    print(f"wrote {target.relative_to(REPO)}")


if __name__ == "__main__":
    main()
