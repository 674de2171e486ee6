"""DGDs carrying the legacy ``DYN_DEPLOYMENT_CONFIG`` env (JSON) in each place a component
reads it from, for the tests of ``dyn_gitops.legacyconfig`` and its fuzz test.

Every document also carries a credential in another env var (:data:`SECRET`), so a test
can check that no problem message shows it."""

from __future__ import annotations

import json
from typing import Any

import yaml

Obj = dict[str, Any]
ENV = "DYN_DEPLOYMENT_CONFIG"
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"
#: a credential planted in the DGD's env beside the config (and, by tests, in it)
SECRET = "sk-live-PLANTED0SECRET0Zq8xYw"
#: the worker the config's entry is keyed by (no replicas: ``workers`` sets them)
WORKER = "Worker"
NAME = "legacy"


def config(workers: Any) -> str:
    """A config setting the worker's ``workers``."""
    return json.dumps({WORKER: {"ServiceArgs": {"workers": workers}}}, separators=(",", ":"))


def _env(value: str) -> list[Obj]:
    return [{"name": "HF_TOKEN", "value": SECRET}, {"name": ENV, "value": value}]


def _alpha(worker: Obj, graph_envs: list[Obj] | None = None) -> Obj:
    spec: Obj = {}
    if graph_envs is not None:
        spec["envs"] = graph_envs
    spec["services"] = {
        "Frontend": {
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {"mainContainer": {"image": IMAGE}},
        },
        WORKER: worker,
    }
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": NAME},
        "spec": spec,
    }


def _alpha_worker(envs: list[Obj] | None = None, main_env: list[Obj] | None = None) -> Obj:
    main: Obj = {"image": IMAGE, "command": ["python3", "-m", "dynamo.vllm"]}
    if main_env is not None:
        main["env"] = main_env
    worker: Obj = {"componentType": "worker", "resources": {"limits": {"gpu": "1"}}}
    if envs is not None:
        worker["envs"] = envs
    worker["extraPodSpec"] = {"mainContainer": main}
    return worker


def _beta(main_env: list[Obj] | None, graph_env: list[Obj] | None) -> Obj:
    main: Obj = {"name": "main", "image": IMAGE, "command": ["python3", "-m", "dynamo.vllm"]}
    if main_env is not None:
        main["env"] = main_env
    main["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    spec: Obj = {}
    if graph_env is not None:
        spec["env"] = graph_env
    spec["components"] = [
        {
            "name": "Frontend",
            "type": "frontend",
            "replicas": 1,
            "podTemplate": {"spec": {"containers": [{"name": "main", "image": IMAGE}]}},
        },
        {"name": WORKER, "type": "worker", "podTemplate": {"spec": {"containers": [main]}}},
    ]
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": NAME},
        "spec": spec,
    }


def _dcd(value: str) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "legacy-worker"},
        "spec": {
            "backendFramework": "vllm",
            "serviceName": WORKER,
            "componentType": "worker",
            "envs": [{"name": ENV, "value": value}, {"name": "HF_TOKEN", "value": SECRET}],
            "resources": {"limits": {"gpu": "1"}},
            "extraPodSpec": {"mainContainer": {"image": IMAGE}},
        },
    }


def _beta_dcd(value: str) -> Obj:
    main = {"name": "main", "image": IMAGE, "env": _env(value)}
    main["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "legacy-worker"},
        "spec": {
            "backendFramework": "vllm",
            "name": WORKER,
            "type": "worker",
            "podTemplate": {"spec": {"containers": [main]}},
        },
    }


#: where the config is written -> (the document with config ``value`` there, the field of
#: the value a problem names, the object it names)
CARRIERS: dict[str, tuple[Any, str, str]] = {
    "v1alpha1 service envs": (
        lambda v: _alpha(_alpha_worker(envs=_env(v))),
        f"spec.services.{WORKER}.envs[1].value",
        f"DynamoGraphDeployment/{NAME}",
    ),
    "v1alpha1 mainContainer env": (
        lambda v: _alpha(_alpha_worker(main_env=_env(v))),
        f"spec.services.{WORKER}.extraPodSpec.mainContainer.env[1].value",
        f"DynamoGraphDeployment/{NAME}",
    ),
    "v1alpha1 mainContainer env over envs": (
        lambda v: _alpha(
            _alpha_worker(envs=_env("{}"), main_env=[{"name": ENV, "value": v}]),
        ),
        f"spec.services.{WORKER}.extraPodSpec.mainContainer.env[0].value",
        f"DynamoGraphDeployment/{NAME}",
    ),
    "v1alpha1 graph envs": (
        lambda v: _alpha(_alpha_worker(), graph_envs=_env(v)),
        "spec.envs[1].value",
        f"DynamoGraphDeployment/{NAME}",
    ),
    "v1beta1 container main env": (
        lambda v: _beta(_env(v), None),
        "spec.components[1].podTemplate.spec.containers[0].env[1].value",
        f"DynamoGraphDeployment/{NAME}",
    ),
    "v1beta1 graph env": (
        lambda v: _beta(None, _env(v)),
        "spec.env[1].value",
        f"DynamoGraphDeployment/{NAME}",
    ),
    "v1alpha1 standalone DCD": (
        _dcd,
        "spec.envs[0].value",
        "DynamoComponentDeployment/legacy-worker",
    ),
    "v1beta1 standalone DCD": (
        _beta_dcd,
        "spec.podTemplate.spec.containers[0].env[1].value",
        "DynamoComponentDeployment/legacy-worker",
    ),
}


def legacy_doc(value: str, carrier: str = "v1alpha1 service envs") -> Obj:
    """A DGD (or DCD) whose worker reads the config ``value`` from ``carrier``."""
    build: Any = CARRIERS[carrier][0]
    doc: Obj = build(value)
    return doc


def dump(doc: Obj) -> str:
    return yaml.safe_dump(doc, sort_keys=False, width=10**6)


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line of ``text`` containing ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)
