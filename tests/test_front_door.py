"""Text from Git nested inside a field enters through the same front door as a document
(issue 25, point 1): the ``nvidia.com/dgd-spec`` payload of a v1beta1 DGD, JSON read by
the bounded reader, numbers written as digits. Each class below crashed (exit 3) or
rendered, with exit 0, objects the API server refuses; now each is an exit-1 problem
naming the file, the line of the carrying field and the path inside it, never a value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliResult, invoke_cli
from support.exported import DGD_SPEC, dump, oracle, pair, payload
from support.rendering import AS_APPLIED_FLAGS

Obj = dict[str, Any]
ANNOTATION = f"metadata.annotations.{DGD_SPEC}"


def _render(tmp_path: Path, *docs: Obj, flags: tuple[str, ...] = AS_APPLIED_FLAGS) -> CliResult:
    (tmp_path / "dgd.yaml").write_text("---\n".join(dump(d) for d in docs))
    return invoke_cli("render", str(tmp_path), *flags)


def _line_of(tmp_path: Path, needle: str) -> int:
    lines = (tmp_path / "dgd.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def _refused(res: CliResult) -> list[str]:
    """The problem lines of an exit-1 run (and that it was one, cleanly)."""
    assert res.code == 1, (res.code, res.stderr[-2000:])
    assert res.stdout == "" and "Traceback" not in res.stderr
    assert "internal error" not in res.stderr
    return [line for line in res.stderr.splitlines() if not line.startswith("dyn-gitops:")]


def _svc(fields: Obj) -> str:
    return payload({"services": {"VllmWorker": fields}})


# --------------------------------------------------------------- the payload: crashes
def test_a_deeply_nested_payload_is_refused(tmp_path: Path) -> None:
    """main: exit 3 (RecursionError of the JSON decoder); the nesting is bounded first."""
    deep = '{"version":1,"spec":{"pvcs":' + "[" * 50_000 + "]" * 50_000 + "}}"
    [problem] = _refused(_render(tmp_path, pair(deep)))
    line = _line_of(tmp_path, DGD_SPEC)
    assert problem == (
        f"dgd.yaml:{line}: DynamoGraphDeployment/pair: {ANNOTATION}: the operator's "
        "conversion payload: nested more than 100 levels deep"
    )


WRONG_TYPES = {
    "pvcs a number": (payload({"pvcs": 5}), "spec.pvcs: Input should be a valid list"),
    "labels a string": (
        _svc({"labels": "team=a"}),
        "spec.services.VllmWorker.labels: Input should be a valid dictionary",
    ),
    "labels a list": (
        _svc({"labels": ["team", "a"]}),
        "spec.services.VllmWorker.labels: Input should be a valid dictionary",
    ),
    "annotations a list": (
        _svc({"annotations": ["a"]}),
        "spec.services.VllmWorker.annotations: Input should be a valid dictionary",
    ),
    "extraPodSpec a string": (
        _svc({"extraPodSpec": "x"}),
        "spec.services.VllmWorker.extraPodSpec: Input should be a valid dictionary",
    ),
    "mainContainer a list": (
        _svc({"envFromSecret": "creds", "extraPodSpec": {"mainContainer": [{"envFrom": []}]}}),
        "spec.services.VllmWorker.extraPodSpec.mainContainer: Input should be a valid dict",
    ),
    "a lone surrogate": (
        '{"version":1,"spec":{"services":{"VllmWorker":{"labels":{"team":"\\ud800"}}}}}',
        "spec.services.VllmWorker.labels.team: a lone surrogate",
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_a_payload_of_wrong_types_is_refused(case: str, tmp_path: Path) -> None:
    """main: exit 3 (TypeError, ValueError, AttributeError, UnicodeEncodeError while
    expanding or writing); now the field inside the payload, at the annotation's line."""
    text, expected = WRONG_TYPES[case]
    [problem] = _refused(_render(tmp_path, pair(text)))
    line = _line_of(tmp_path, DGD_SPEC)
    assert problem.startswith(
        f"dgd.yaml:{line}: DynamoGraphDeployment/pair: {ANNOTATION}: {expected}"
    ), problem


# ------------------------------------------------- the payload: rendered, then refused
RENDERED_ON_MAIN = {
    "an integer label value": ({"labels": {"team": 5}}, "labels.team"),
    "a mapping as an annotation value": ({"annotations": {"note": {"a": "b"}}}, "annotations.note"),
    "a mapping as the dynamo-namespace": ({"dynamoNamespace": {"a": "b"}}, "dynamoNamespace"),
    "a list as the sub-component-type": ({"subComponentType": ["prefill"]}, "subComponentType"),
}


@pytest.mark.parametrize("case", sorted(RENDERED_ON_MAIN))
def test_payload_mistakes_are_refused_as_in_v1alpha1(case: str, tmp_path: Path) -> None:
    """main: exit 0, rendering labels and annotations the API server refuses (the same
    mistake written in v1alpha1 was exit 1 already: both are now, at their own field)."""
    fields, where = RENDERED_ON_MAIN[case]
    (tmp_path / "beta").mkdir()
    [problem] = _refused(_render(tmp_path / "beta", pair(_svc(fields))))
    assert f"{ANNOTATION}: spec.services.VllmWorker.{where}: Input should be a valid " in problem
    alpha = _alpha({"VllmWorker": fields})
    (tmp_path / "alpha").mkdir()
    [problem] = _refused(_render(tmp_path / "alpha", alpha))
    assert f": spec.services.VllmWorker.{where}: Input should be a valid " in problem


def _alpha(services: dict[str, Obj]) -> Obj:
    image = {"extraPodSpec": {"mainContainer": {"image": "nvcr.io/x/vllm-runtime:1.5.1"}}}
    base: dict[str, Obj] = {
        "Frontend": {"componentType": "frontend", **image},
        "VllmWorker": {"componentType": "worker", "resources": {"limits": {"gpu": "1"}}, **image},
    }
    for name, fields in services.items():
        base[name] = {**base.get(name, {}), **fields}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "pair"},
        "spec": {"backendFramework": "vllm", "services": base},
    }


def test_every_problem_of_a_payload_in_one_run(tmp_path: Path) -> None:
    """main: exit 3 at the first (pvcs: 5); now each wrong field is named, in one run."""
    text = payload(
        {
            "pvcs": 5,
            "services": {
                "Frontend": {"labels": "x", "dynamoNamespace": 7},
                "VllmWorker": {"annotations": [], "subComponentType": {}},
            },
        }
    )
    problems = _refused(_render(tmp_path, pair(text)))
    fields = sorted(p.split(f"{ANNOTATION}: ")[1].split(":")[0] for p in problems)
    assert fields == [
        "spec.pvcs",
        "spec.services.Frontend.dynamoNamespace",
        "spec.services.Frontend.labels",
        "spec.services.VllmWorker.annotations",
        "spec.services.VllmWorker.subComponentType",
    ]


def test_no_value_of_a_payload_is_quoted(tmp_path: Path) -> None:
    """main: exit 0 (a 64-character label value rendered); now refused without quoting any
    value of the payload (one may be a credential)."""
    secret = "s3cr3t" * 11  # 66 characters: no label value
    text = _svc(
        {
            "labels": {"token": secret},
            "dynamoNamespace": secret,
            "extraPodSpec": {"mainContainer": {"resources": {"limits": {"cpu": f"{secret} x"}}}},
        }
    )
    res = _render(tmp_path, pair(text))
    problems = _refused(res)
    assert problems and secret not in res.stderr


# ------------------------------------------- labels the API server refuses, any source
BAD_VALUE = "x" * 64  # a label value of more than 63 characters
SOURCES: dict[str, tuple[Any, str]] = {
    "payload labels": (
        lambda: pair(_svc({"labels": {"team": BAD_VALUE}})),
        f"{ANNOTATION}: spec.services.VllmWorker.labels.team: not a label value",
    ),
    "payload annotation key": (
        lambda: pair(_svc({"annotations": {"a b": "c"}})),
        f"{ANNOTATION}: spec.services.VllmWorker.annotations.a b: not a label or annotation key",
    ),
    "payload dynamoNamespace": (
        lambda: pair(_svc({"dynamoNamespace": BAD_VALUE})),
        f"{ANNOTATION}: spec.services.VllmWorker.dynamoNamespace: becomes a label value",
    ),
    "payload pvc name": (
        lambda: pair(payload({"pvcs": [{"name": "Models_PVC", "create": False}]})),
        f"{ANNOTATION}: spec.pvcs[0].name: not a DNS-1123 label (a volume name)",
    ),
    "v1alpha1 pvc name": (
        lambda: _with(_alpha({}), ["spec", "pvcs"], [{"name": "Models_PVC", "create": False}]),
        "spec.pvcs[0].name: not a DNS-1123 label (a volume name)",
    ),
    "v1alpha1 service labels": (
        lambda: _alpha({"VllmWorker": {"labels": {"team": BAD_VALUE}}}),
        "spec.services.VllmWorker.labels.team: not a label value",
    ),
    "v1alpha1 subComponentType": (
        lambda: _alpha({"VllmWorker": {"subComponentType": "pre fill"}}),
        "spec.services.VllmWorker.subComponentType: becomes a label value",
    ),
    "v1alpha1 extraPodMetadata": (
        lambda: _alpha({"VllmWorker": {"extraPodMetadata": {"labels": {"-x": "y"}}}}),
        "spec.services.VllmWorker.extraPodMetadata.labels.-x: not a label or annotation key",
    ),
    "v1beta1 podTemplate labels": (
        lambda: _with(
            pair(),
            ["spec", "components", 1, "podTemplate", "metadata"],
            {"labels": {"team": BAD_VALUE}},
        ),
        "spec.components[1].podTemplate.metadata.labels.team: not a label value",
    ),
    "graph labels": (
        lambda: _with(pair(), ["spec", "labels"], {"Bad/Prefix/key": "v"}),
        "spec.labels.Bad/Prefix/key: not a label or annotation key",
    ),
    "DGD labels": (
        lambda: _with(pair(), ["metadata", "labels"], {"team": BAD_VALUE}),
        "metadata.labels.team: not a label value",
    ),
    "pass-through object": (
        lambda: {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "annotations": {"UPPER.case/x": "y"}},
        },
        "metadata.annotations.UPPER.case/x: not a label or annotation key",
    ),
}


def _with(doc: Obj, path: list[Any], value: Any) -> Obj:
    node: Any = doc
    for step in path[:-1]:
        node = node.setdefault(step, {}) if isinstance(node, dict) else node[step]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_labels_the_api_server_refuses_are_refused_at_their_source(
    source: str, tmp_path: Path
) -> None:
    """main: exit 0, the label or annotation rendered onto objects the API server refuses;
    now an exit-1 problem at the field written (file:line), whatever the source."""
    make, expected = SOURCES[source]
    problems = _refused(_render(tmp_path, make()))
    assert any(expected in p for p in problems), problems
    assert all(p.startswith("dgd.yaml:") and BAD_VALUE not in p for p in problems)


def test_a_derived_label_value_is_refused_on_the_output(tmp_path: Path) -> None:
    """main: exit 0, every child labelled ``nvidia.com/dynamo-namespace: <namespace>-<name>``
    of 81 characters; finalize checks the labels of every object it writes."""
    doc = _with(pair(), ["metadata", "name"], "b" * 30)
    problems = _refused(_render(tmp_path, doc, flags=(*AS_APPLIED_FLAGS, "--namespace", "a" * 50)))
    assert problems and all(
        "metadata.labels.nvidia.com/dynamo-namespace: not a label value" in p for p in problems
    )


# ---------------------------------------------------------------- integer digits
DIGITS = "9" * 5_000  # more than Python's int() converts (4,300)


def _image(doc: Obj, image: str) -> Obj:
    for c in doc["spec"]["components"]:
        c["podTemplate"]["spec"]["containers"][0]["image"] = image
    return doc


@pytest.mark.parametrize("tag", [f"{DIGITS}.1.0", f"1.5.{DIGITS}", f"v1.{DIGITS}.0-rc1"])
def test_an_image_tag_of_many_digits_is_no_version(tag: str, tmp_path: Path) -> None:
    """main: exit 3 (ValueError: Exceeds the limit (4300 digits)); now no semantic version:
    rendered with the legacy profile (lenient), or refused with exit 1 (strict)."""
    doc = _image(pair(), f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}")
    (tmp_path / "lenient").mkdir()
    assert _render(tmp_path / "lenient", doc).code == 0
    strict = ("--runtime-version-admission", "strict", "--origin-version", "none")
    (tmp_path / "strict").mkdir()
    problems = _refused(_render(tmp_path / "strict", doc, flags=strict))
    assert all("runtimeVersionOverride: is required" in p for p in problems)


@pytest.mark.parametrize("version", [f"{DIGITS}.0.0", f"1.{DIGITS}", f"1.0.{DIGITS}-rc.1"])
def test_an_origin_version_of_many_digits_is_refused(version: str, tmp_path: Path) -> None:
    """main: exit 3 (int() of the annotation's digits); now exit 1 at the annotation."""
    doc = _with(
        pair(), ["metadata", "annotations"], {"nvidia.com/dynamo-operator-origin-version": version}
    )
    [problem] = _refused(_render(tmp_path, doc))
    assert (
        "metadata.annotations.nvidia.com/dynamo-operator-origin-version: must be a semantic version"
        in problem
    )


def test_numbers_of_many_digits_elsewhere_do_not_crash(tmp_path: Path) -> None:
    """main: exit 3 each: a GPU quantity of 5,000 digits (decimal InvalidOperation), a
    multinode flag value (int() in the LWS command), a rollout annotation (int())."""
    gpu = pair()
    gpu["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": DIGITS}
    }
    (tmp_path / "gpu").mkdir()
    [problem] = _refused(_render(tmp_path / "gpu", gpu))
    assert "quantity has more than 4300 digits" in problem

    flag = pair()
    worker = flag["spec"]["components"][1]
    worker["multinode"] = {"nodeCount": 2}
    worker["podTemplate"]["spec"]["containers"][0]["args"] = ["--tensor-parallel-size", DIGITS]
    (tmp_path / "flag").mkdir()
    assert _render(tmp_path / "flag", flag, flags=(*AS_APPLIED_FLAGS, "--lws")).code == 0

    for surge in (DIGITS, "²"):
        doc = _with(
            pair(),
            ["spec", "components", 1, "podTemplate", "metadata"],
            {"annotations": {"nvidia.com/deployment-rolling-update-max-surge": surge}},
        )
        (tmp_path / "surge").mkdir(exist_ok=True)
        res = _render(tmp_path / "surge", doc)
        assert res.code == 0, res.stderr[-500:]
        [deployment] = [
            d
            for d in yaml.safe_load_all(res.stdout)
            if d["kind"] == "Deployment" and "vllmworker" in d["metadata"]["name"]
        ]
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == surge


# ------------------------------------------------------------ the bounded reader
@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": ["\\ud800"]}', "a[0]: a lone surrogate"),
        ('{"a": {"b": NaN}}', "a.b: NaN and infinity are not JSON numbers"),
        ('{"a": 1e999}', "a: a number beyond the range of a 64-bit float"),
        ('{"a": [' + "7" * 5000 + "]}", "a[0]: an integer of more than 4300 digits"),
    ],
)
def test_the_bounded_reader_refuses_what_no_document_holds(text: str, where: str) -> None:
    """main: ``json_loads_bounded`` returned these (NaN, infinity, lone surrogates:
    nothing a YAML document or Kubernetes holds) or raised Python's own ValueError for the
    digits; now one error type, naming the path inside the text."""
    from dyn_gitops.parse import json_loads_bounded

    with pytest.raises(ValueError) as err:
        json_loads_bounded(text, max_depth=10)
    assert str(err.value) == where or str(err.value).startswith(where)
    assert getattr(err.value, "path", None) is not None
    assert "7777" not in str(err.value)


def test_the_bounded_reader_bounds_size_nodes_and_depth() -> None:
    from dyn_gitops.bounded import Bounds, EmbeddedError, loads_json

    bounds = Bounds(max_chars=1000, max_depth=3, max_nodes=10)
    assert loads_json('{"a": [1, 2, {"b": null}]}', bounds) == {"a": [1, 2, {"b": None}]}
    for text, why in [
        ("[" + "1," * 600 + "1]", "longer than 1000 characters"),
        ('{"a": [[[1]]]}', "nested more than 3 levels deep"),
        ("[" + ",".join(["1"] * 20) + "]", "more than 10 values"),
        ('{"a": }', "not JSON: Expecting value (line 1, column 7)"),
    ]:
        with pytest.raises(EmbeddedError) as err:
            loads_json(text, bounds)
        assert (err.value.path, err.value.reason) == ((), why)


def test_the_payload_bounds_are_a_documents() -> None:
    """The payload's fixed bounds are a document's at their defaults."""
    from dyn_gitops.bounded import DOCUMENT_BOUNDS
    from dyn_gitops.settings import RenderSettings

    defaults = RenderSettings()
    assert (DOCUMENT_BOUNDS.max_chars, DOCUMENT_BOUNDS.max_depth, DOCUMENT_BOUNDS.max_nodes) == (
        defaults.max_file_bytes,
        defaults.max_depth,
        defaults.max_yaml_nodes,
    )


def test_every_operator_payload_is_read_typed() -> None:
    """Every payload the operator's own conversion wrote for the upstream examples reads
    without a problem, into the v1alpha1 model."""
    from dyn_gitops.models import dgdspec

    read = [dgdspec.read({DGD_SPEC: e["dgd-spec"]}) for e in oracle().values() if e["dgd-spec"]]
    assert len(read) >= 20
    assert all(k.problems == () and k.spec is not None for k in read)
    services = {n for k in read for n in (k.spec.services or {}) if k.spec is not None}
    assert services and json.dumps(sorted(services))


def test_a_krm_index_of_many_digits_does_not_crash() -> None:
    """main: exit 3 (int() of the ``config.kubernetes.io/index`` annotation of a ResourceList
    item whose problem is reported); now the index is left out, the problem reported."""
    for index in (DIGITS, "²"):
        item = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "Bad_Name",
                "annotations": {
                    "config.kubernetes.io/index": index,
                    "config.kubernetes.io/path": "a.yaml",
                },
            },
        }
        rl = {"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": [item]}
        res = invoke_cli("krm", stdin=yaml.safe_dump(rl, width=10**9, allow_unicode=True))
        assert res.code == 1 and "Traceback" not in res.stderr, res.stderr[-500:]
        assert "metadata.name" in res.stdout + res.stderr


def test_a_quantity_in_other_digits_is_refused(tmp_path: Path) -> None:
    """main: exit 0, ``cpu: "٣"`` rendered (``\\d`` takes any script's digits; the API
    server takes ASCII ones only); now refused at the field."""
    doc = pair()
    doc["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "٣"}
    }
    [problem] = _refused(_render(tmp_path, doc))
    assert "containers[0].resources.limits.cpu: expected a Kubernetes quantity" in problem
