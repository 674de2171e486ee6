"""DynamoModel on the render side (issue 15): passed through unchanged, validated as the
operator's webhook does (with errors that say what is missing), served by our CRD, and the
model's headless Service still emitted from the DGD's ``modelRef``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.cli import invoke_cli
from support.paths import CONFORMANCE
from support.refusals import assert_refused, write
from support.rendering import render

from dyn_gitops import keys, naming
from dyn_gitops.crds import crds

LORA_MODEL = CONFORMANCE / "examples__backends__vllm__deploy__lora__lora-model.yaml"
AGG_LORA = CONFORMANCE / "examples__backends__vllm__deploy__lora__agg_lora.yaml"

MODEL = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoModel
metadata:
  name: my-lora
spec:
{spec}"""


def _model(tmp_path: Path, spec: str) -> Path:
    return write(tmp_path / "model.yaml", MODEL.format(spec=spec))


def test_the_example_passes_through_unchanged() -> None:
    (out,) = render(LORA_MODEL)
    assert out == yaml.safe_load(LORA_MODEL.read_text())


def test_the_example_pair_renders_together_and_keeps_the_model_service(tmp_path: Path) -> None:
    for src in (LORA_MODEL, AGG_LORA):
        write(tmp_path / src.name, src.read_text())
    objs = render(tmp_path, runtime_version_admission="lenient")
    (model,) = [o for o in objs if o["kind"] == "DynamoModel"]
    name = model["spec"]["baseModelName"]
    (svc,) = [o for o in objs if o["metadata"]["name"] == naming.model_service_name(name)]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {keys.LABEL_BASE_MODEL_HASH: naming.model_hash(name)}
    assert svc["metadata"]["annotations"][keys.ANN_BASE_MODEL] == name
    workers = [
        o
        for o in objs
        if o["kind"] == "Deployment"
        and o["spec"]["template"]["metadata"]["labels"].get(keys.LABEL_BASE_MODEL_HASH)
        == naming.model_hash(name)
    ]
    assert len(workers) == 1


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        pytest.param(
            "  modelName: a\n  modelType: lora\n  source:\n    uri: s3://b/p\n",
            [
                "model.yaml:5: DynamoModel/my-lora: spec.baseModelName: required field is "
                "missing: the base model whose workers serve it: the modelRef.name of a "
                "DynamoGraphDeployment component"
            ],
            id="no-base-model",
        ),
        pytest.param(
            "  modelName: a\n  baseModelName: ''\n",
            ["spec.baseModelName: String should have at least 1 character"],
            id="empty-base-model",
        ),
        pytest.param(
            "  baseModelName: Qwen/Qwen3-0.6B\n",
            ["spec.modelName: required field is missing: the name the adapter is served under"],
            id="no-model-name",
        ),
        pytest.param(
            "  modelName: a\n  baseModelName: b\n  modelType: lora\n",
            [
                "model.yaml:5: DynamoModel/my-lora: spec.source: a lora DynamoModel needs "
                "spec.source.uri (s3://bucket/path or hf://org/model@revision)"
            ],
            id="lora-without-source",
        ),
        pytest.param(
            "  modelName: a\n  baseModelName: b\n  modelType: lora\n  source: {}\n",
            ["spec.source.uri: required field is missing: where the adapter is loaded from"],
            id="source-without-uri",
        ),
        pytest.param(
            "  modelName: a\n  baseModelName: b\n  modelType: lora\n  source:\n"
            "    uri: gs://bucket/x\n",
            [
                "model.yaml:10: DynamoModel/my-lora: spec.source.uri: source URI must start "
                "with s3:// or hf:// (found 'gs://bucket/x')"
            ],
            id="bad-scheme",
        ),
        pytest.param(
            "  modelName: a\n  baseModelName: b\n  modelType: qlora\n",
            ["spec.modelType: Input should be 'base', 'lora' or 'adapter' (found 'qlora')"],
            id="bad-type",
        ),
        pytest.param(
            "  modelName: a\n  baseModelNmae: b\n",
            ["unknown field 'baseModelNmae' (did you mean 'baseModelName'?)"],
            id="typo",
        ),
    ],
)
def test_a_bad_model_is_refused_with_what_is_missing(
    tmp_path: Path, spec: str, fragments: list[str]
) -> None:
    assert_refused(invoke_cli("render", str(_model(tmp_path, spec))), *fragments)


def test_a_base_model_needs_no_source(tmp_path: Path) -> None:
    (out,) = render(_model(tmp_path, "  modelName: a\n  baseModelName: b\n"))
    assert out["spec"] == {"modelName": "a", "baseModelName": "b"}  # no default stamped


def test_only_the_served_version_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", MODEL.replace("v1alpha1", "v1beta1").format(spec="  a: b\n"))
    assert_refused(
        invoke_cli("render", str(path)), "DynamoModel is served as nvidia.com/v1alpha1 only"
    )


def test_the_crd_serves_spec_and_status_as_upstream() -> None:
    (crd,) = [c for c in crds() if c["spec"]["names"]["kind"] == "DynamoModel"]
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "dynamomodels.nvidia.com"
    assert spec["names"]["shortNames"] == ["dm"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    assert schema["spec"]["required"] == ["modelName", "baseModelName"]
    assert schema["spec"]["properties"]["modelType"]["enum"] == ["base", "lora", "adapter"]
    status = schema["status"]["properties"]
    assert set(status) == {"endpoints", "readyEndpoints", "totalEndpoints", "conditions"}
    assert set(status["endpoints"]["items"]["properties"]) == {"address", "podName", "ready"}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "BaseModel",
        "Type",
        "Ready",
        "Total",
        "Age",
    ]


def test_the_chart_ships_the_crd() -> None:
    chart = Path(__file__).resolve().parent.parent / "charts" / "dyn-gitops" / "crds"
    docs = [d for f in chart.glob("*.yaml") for d in yaml.safe_load_all(f.read_text()) if d]
    assert "dynamomodels.nvidia.com" in {d["metadata"]["name"] for d in docs}
