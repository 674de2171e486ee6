"""Issue 25, point 2: one typed form per DGD and one path system.

Validate builds each DGD's typed v1beta1 form once (``hubform.Graph``: a v1alpha1 DGD
converted up once, its components validated once); the rules, the expansion, the worker
hash and the emitted DGD read only it. Every problem, from the rules or the expansion,
names the field as the user wrote it, v1alpha1 or v1beta1, mapped in one place
(``hubform.Graph.written_path``)."""

from __future__ import annotations

import ast
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.rendering import render

from dyn_gitops import memo
from dyn_gitops.errors import RenderError
from dyn_gitops.models import v1alpha1, v1beta1
from dyn_gitops.workerhash import hub

DYN = Path(memo.__file__).parent
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"


# ------------------------------------------------------------- one conversion, one validation
class _Counting:
    """A pydantic validator that counts its top-level validations (``model_validate``)."""

    def __init__(self, name: str, inner: Any, counts: Counter[str]) -> None:
        self._name, self._inner, self._counts = name, inner, counts

    def validate_python(self, *args: Any, **kwargs: Any) -> Any:
        self._counts[self._name] += 1
        return self._inner.validate_python(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Conversions up (graph spec, services) and validations of a DGD, its graph spec or a
    component, counted during the test (memos emptied first: every call is made)."""
    found: Counter[str] = Counter()
    memo.clear_all()
    for name, model in (
        ("v1alpha1 DGD", v1alpha1.DynamoGraphDeployment),
        ("v1beta1 DGD", v1beta1.DynamoGraphDeployment),
        ("GraphSpec", v1beta1.GraphSpec),
        ("Component", v1beta1.Component),
    ):
        validator = _Counting(name, model.__pydantic_validator__, found)
        monkeypatch.setattr(model, "__pydantic_validator__", validator)
    spec_from_alpha, component_from_alpha = hub.spec_from_alpha, hub.component_from_alpha

    def converted_spec(spec: Any) -> Any:
        found["graph spec converted"] += 1
        return spec_from_alpha(spec)

    def converted_service(name: str, svc: Any, **kwargs: Any) -> Any:
        found["service converted"] += 1
        return component_from_alpha(name, svc, **kwargs)

    monkeypatch.setattr(hub, "spec_from_alpha", converted_spec)
    monkeypatch.setattr(hub, "component_from_alpha", converted_service)
    yield found
    memo.clear_all()  # nothing made under the counters outlives the test


ALPHA = f"""\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: counted
spec:
  envs:
    - name: A
      value: "1"
  services:
    Frontend:
      componentType: frontend
      extraPodSpec:
        mainContainer:
          image: {IMAGE}
    Worker:
      componentType: worker
      subComponentType: prefill
      replicas: 2
      resources:
        limits: {{gpu: "1"}}
      extraPodSpec:
        mainContainer:
          image: {IMAGE}
          command: [python3, -m, dynamo.vllm]
"""


def _beta_twin() -> str:
    return f"""\
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata:
  name: counted
spec:
  env:
    - name: A
      value: "1"
  components:
    - name: Frontend
      type: frontend
      podTemplate:
        spec:
          containers:
            - name: main
              image: {IMAGE}
    - name: Worker
      type: prefill
      replicas: 2
      podTemplate:
        spec:
          containers:
            - name: main
              image: {IMAGE}
              command: [python3, -m, dynamo.vllm]
              resources:
                limits: {{nvidia.com/gpu: "1"}}
"""


@pytest.mark.parametrize("source_api_version", ["v1beta1", "v1alpha1", "as-written"])
def test_a_v1alpha1_dgd_is_converted_and_validated_once(
    tmp_path: Path, counts: Counter[str], source_api_version: str
) -> None:
    """Rendering a v1alpha1 DGD (its workers hashed, the DGD emitted) converts its graph
    spec once and each service once, and validates the DGD, its converted graph spec and
    each converted component once (before: the graph spec converted 4 times and validated
    twice, each component validated twice)."""
    (tmp_path / "g.yaml").write_text(ALPHA)
    objs = render(tmp_path, namespace="ns", source_api_version=source_api_version)
    assert any(o["kind"] == "DynamoGraphDeployment" for o in objs)  # emitted
    assert any("nvidia.com/dynamo-worker-hash" in (o["metadata"].get("labels") or {}) for o in objs)
    assert dict(counts) == {
        "v1alpha1 DGD": 1,
        "graph spec converted": 1,
        "service converted": 2,
        "GraphSpec": 1,
        "Component": 2,
    }


def test_a_v1beta1_dgd_is_validated_once(tmp_path: Path, counts: Counter[str]) -> None:
    """A v1beta1 DGD is validated once, as written; its components are not validated again
    on their own, nothing is converted (before: each component validated again, and the
    graph spec, to expand)."""
    (tmp_path / "g.yaml").write_text(_beta_twin())
    objs = render(tmp_path, namespace="ns")
    assert any(o["kind"] == "DynamoGraphDeployment" for o in objs)
    assert dict(counts) == {"v1beta1 DGD": 1}


def _classes(name_ends: str) -> list[str]:
    found = []
    for path in sorted(DYN.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            public = isinstance(node, ast.ClassDef) and not node.name.startswith("_")
            if public and node.name.endswith(name_ends):
                found.append(f"{path.relative_to(DYN)}:{node.name}")
    return found


def test_one_graph_class() -> None:
    """One class is a DGD's form (before: ``rules.Graph`` for the rules and
    ``expand/components.Graph`` for the expansion); the worker hash's plain-data input, which
    the companion controller also builds from a live DGD, is made from it."""
    assert _classes("Graph") == ["hubform.py:Graph", "workerhash/hub.py:HubGraph"]


def _calls(name: str) -> list[str]:
    found = []
    for path in sorted(DYN.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == name:
                    found.append(f"{path.relative_to(DYN)}:{node.lineno}")
    return found


def test_component_context_is_built_in_one_place() -> None:
    """One constructor call (before: two, the Grove clique's and the DCD's, which drifted)."""
    assert len(_calls("ComponentContext")) == 1, _calls("ComponentContext")


def test_nothing_after_validate_validates_a_dgd_again() -> None:
    """After validate, no module validates a DGD, its graph spec or a component from data:
    the form is read as built. Left: the legacy config's rewrite of a component, and the
    worker hash's ``kvTransferPolicy``, read from plain data as the companion controller
    reads a live DGD."""
    readers = [
        at
        for at in _calls("model_validate")
        if at.startswith(("expand/", "workerhash/", "to_v1beta1.py"))
    ]
    assert [at.split(":")[0] for at in readers] == ["expand/legacy.py", "workerhash/compute.py"]


# ------------------------------------------------------------------------ one path system
def _problems(tmp_path: Path, text: str, **settings: Any) -> list[tuple[str, int | None]]:
    """(field path as printed, line) of each problem of rendering ``text``."""
    (tmp_path / "g.yaml").write_text(textwrap.dedent(text))
    with pytest.raises(RenderError) as info:
        render(tmp_path, namespace="ns", **settings)
    return [(p.field, p.line) for p in info.value.problems]


def _line(text: str, marker: str) -> int:
    """The 1-based line of ``text`` that ends with ``# marker``."""
    lines = textwrap.dedent(text).splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.endswith(f"# {marker}"))


def _alpha(service: str, spec: str = "") -> str:
    return (
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata:\n  name: g\n"
        f"spec:\n{spec}  services:\n    W:\n{textwrap.indent(service, '      ')}"
    )


def _beta(component: str, spec: str = "") -> str:
    return (
        "apiVersion: nvidia.com/v1beta1\nkind: DynamoGraphDeployment\nmetadata:\n  name: g\n"
        f"spec:\n{spec}  components:\n    - name: W\n{textwrap.indent(component, '      ')}"
    )


BAD_CONFIG = """\
  envs:
    - name: DYN_DEPLOYMENT_CONFIG
      value: '{"W":{"ServiceArgs":{"resources":{"cpu":"two"}}}}'  # here
"""
SERVICE = f"""\
componentType: worker
extraPodSpec:
  mainContainer:
    image: {IMAGE}
    command: [python3, -m, dynamo.vllm]
"""
COMPONENT = f"""\
type: worker
podTemplate:
  spec:
    containers:
      - name: main
        image: {IMAGE}
        command: [python3, -m, dynamo.vllm]
"""

TWO_BACKENDS = '[sh, -c, "python3 -m dynamo.vllm; python3 -m dynamo.sglang"]'

#: the same mistake written in each version: (v1alpha1 text, its path; v1beta1 text, its
#: path), the line of the field marked ``# here``
CASES: dict[str, tuple[str, str, str, str]] = {
    # the validate stage (legacyconfig): the config's quantity, in the DGD's env
    "legacy config in the graph env": (
        _alpha(SERVICE, BAD_CONFIG),
        "spec.envs[0].value",
        _beta(COMPONENT, BAD_CONFIG.replace("envs:", "env:")),
        "spec.env[0].value",
    ),
    # the validate stage (legacyconfig): the config in the component's own env
    "legacy config in the service env": (
        _alpha(
            SERVICE
            + "envs:\n  - name: DYN_DEPLOYMENT_CONFIG\n"
            + '    value: \'{"W":{"ServiceArgs":{"resources":{"cpu":"two"}}}}\'  # here\n'
        ),
        "spec.services.W.envs[0].value",
        _beta(
            COMPONENT
            + "        env:\n          - name: DYN_DEPLOYMENT_CONFIG\n"
            + '            value: \'{"W":{"ServiceArgs":{"resources":{"cpu":"two"}}}}\'  # here\n'
        ),
        "spec.components[0].podTemplate.spec.containers[0].env[0].value",
    ),
    # the expansion: container main's command runs two backends
    "two backends": (
        _alpha(SERVICE.replace("mainContainer:", "mainContainer:  # here")).replace(
            "[python3, -m, dynamo.vllm]", TWO_BACKENDS
        ),
        "spec.services.W.extraPodSpec.mainContainer",
        _beta(COMPONENT.replace("- name: main", "- name: main  # here")).replace(
            "[python3, -m, dynamo.vllm]", TWO_BACKENDS
        ),
        "spec.components[0].podTemplate.spec.containers[0]",
    ),
    # the expansion: a compilation cache with no mount path for a backend without default
    "compilation cache path": (
        _alpha(
            SERVICE.replace("dynamo.vllm", "dynamo.sglang")
            + "volumeMounts:\n  - name: data\n    mountPoint: /data\n"
            + "  - name: cache  # here\n    useAsCompilationCache: true\n"
        ),
        "spec.services.W.volumeMounts[1].mountPoint",
        _beta(
            COMPONENT.replace("dynamo.vllm", "dynamo.sglang")
            + "compilationCache:  # here\n  pvcName: cache\n"
        ),
        "spec.components[0].compilationCache.mountPath",
    ),
    # a rule: the runner's replica ceiling
    "replicas": (
        _alpha(SERVICE + "replicas: 3  # here\n"),
        "spec.services.W.replicas",
        _beta(COMPONENT + "replicas: 3  # here\n"),
        "spec.components[0].replicas",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_mistake_names_the_field_written_in_each_version(
    tmp_path: Path, case: str
) -> None:
    """From the rules and from the expansion alike, a problem names the path as written:
    a v1alpha1 DGD's service field, a v1beta1 DGD's component field, and its line (before,
    the expansion named v1alpha1 paths, mapped approximately into a v1beta1 document:
    ``spec.components[0].podTemplate`` for both legacy configs, ``...podTemplate.spec`` for
    the container; and a v1alpha1 DGD's legacy config in its env as the service's
    ``envs``)."""
    alpha, alpha_path, beta, beta_path = CASES[case]
    for text, path in ((alpha, alpha_path), (beta, beta_path)):
        found = _problems(tmp_path, text, max_replicas=2)
        assert found == [(path, _line(text, "here"))], text
