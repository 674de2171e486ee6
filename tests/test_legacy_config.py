"""The legacy ``DYN_DEPLOYMENT_CONFIG`` env (issue 25, points 1, 3 and 4): parsed into a
typed model as the operator's ``json.Unmarshal`` reads it, checked before anything is
built, ``workers`` within the setting max-replicas and never negative, and every problem
at the value of the env entry carrying it (file, line, field as written in v1alpha1 or
v1beta1) with the path inside the JSON, never any part of the value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliResult, invoke_cli, run_cli
from support.legacy_config import (
    CARRIERS,
    ENV,
    SECRET,
    WORKER,
    config,
    dump,
    legacy_doc,
    line_of,
)

from dyn_gitops import keys

Obj = dict[str, Any]
LIMIT = "is more than the 10000 replicas allowed (setting max-replicas)"


def invoke_render(tmp_path: Path, doc: Obj, *flags: str) -> tuple[CliResult, str]:
    text = dump(doc)
    (tmp_path / "dgd.yaml").write_text(text)
    return invoke_cli("render", str(tmp_path), *flags), text


def refused(res: CliResult, *needles: str) -> None:
    assert res.code == 1, f"exit {res.code}\n{res.stderr}\n{res.stdout[:500]}"
    assert res.stdout == ""
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    for needle in needles:
        assert needle in res.stderr, res.stderr


def problem(tmp_path: Path, carrier: str, value: str, message: str, needle: str) -> str:
    """The line a problem with the config ``value`` at ``carrier`` is reported as."""
    _, field, obj = CARRIERS[carrier]
    text = dump(legacy_doc(value, carrier))
    return f"dgd.yaml:{line_of(text, needle)}: {obj}: {field}: {ENV}: {message}"


def desired_replicas(stdout: str) -> list[str]:
    return [
        (o["metadata"].get("annotations") or {})[keys.ANN_DESIRED_REPLICAS]
        for o in yaml.safe_load_all(stdout)
        if o
        and o.get("kind") in ("Deployment", "LeaderWorkerSet")
        and keys.ANN_DESIRED_REPLICAS in (o["metadata"].get("annotations") or {})
    ]


# ----------------------------------------------------------------------------- the counts
@pytest.mark.parametrize("workers", [20_000, 10**12])
@pytest.mark.parametrize("carrier", sorted(CARRIERS))
def test_workers_over_max_replicas_is_refused_where_it_is_written(
    tmp_path: Path, carrier: str, workers: int
) -> None:
    """Before: exit 0, the worker's ``dyn-gitops.io/desired-replicas`` was the count, which
    the companion controller applies with no ceiling."""
    res, _ = invoke_render(tmp_path, legacy_doc(config(workers), carrier))
    where = problem(
        tmp_path, carrier, config(workers), f"{WORKER}.ServiceArgs.workers: {LIMIT}", "ServiceArgs"
    )
    refused(res, where)
    assert str(workers) not in res.stderr  # a part of the env value


@pytest.mark.parametrize("carrier", sorted(CARRIERS))
def test_workers_within_max_replicas_are_the_desired_replicas(tmp_path: Path, carrier: str) -> None:
    res, _ = invoke_render(tmp_path, legacy_doc(config(20_000), carrier), "--max-replicas", "20000")
    assert res.code == 0, res.stderr
    assert desired_replicas(res.stdout) == ["20000"]


def test_negative_workers_is_an_input_error(tmp_path: Path) -> None:
    """Before: exit 3 (the v1beta1 model refused replicas -5 inside the expansion), its
    message quoting the value."""
    res, text = invoke_render(tmp_path, legacy_doc(config(-5)))
    line = line_of(text, "ServiceArgs")
    refused(
        res,
        f"dgd.yaml:{line}: DynamoGraphDeployment/legacy: spec.services.{WORKER}.envs[1].value: "
        f"{ENV}: {WORKER}.ServiceArgs.workers: must not be negative (it sets the replicas)",
    )
    assert "-5" not in res.stderr


# ----------------------------------------------------------------------------- the types
def args(**fields: Any) -> Obj:
    """A config whose worker's entry has these ``ServiceArgs``."""
    return {WORKER: {"ServiceArgs": fields}}


WHOLE = "must be a whole number, found"
OBJECT = "must be a JSON object, found"
WRONG_TYPES = [
    # (config, the path and what is wrong): Go's json.Unmarshal refuses each of them
    (args(workers="3"), f"Worker.ServiceArgs.workers: {WHOLE} a string"),
    (args(workers=2.0), f"Worker.ServiceArgs.workers: {WHOLE} a number with a fraction or an"),
    (args(Workers=True), f"Worker.ServiceArgs.workers: {WHOLE} a boolean"),
    ({WORKER: {"serviceargs": {"workers": [3]}}}, f"Worker.ServiceArgs.workers: {WHOLE} an array"),
    ({WORKER: {"ServiceArgs": 5}}, f"Worker.ServiceArgs: {OBJECT} a number"),
    ({WORKER: "x"}, f"Worker: {OBJECT} a string"),
    (args(resources=[]), f"Worker.ServiceArgs.resources: {OBJECT} an array"),
    (args(resources={"CPU": 2}), "Worker.ServiceArgs.resources.cpu: must be a string, found a"),
    (
        args(resources={"custom": {"a.io/x": 1}}),
        "Worker.ServiceArgs.resources.custom.<key 1>: must be a string, found a number",
    ),
    ({"Other": args(workers="3")[WORKER], WORKER: {}}, f"<key 1>.ServiceArgs.workers: {WHOLE} a"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "message"), WRONG_TYPES)
def test_wrong_types_are_input_errors(tmp_path: Path, value: Obj, message: str) -> None:
    """Before: exit 0, the value ignored (or a number read as a quantity), where the
    operator fails the whole config."""
    raw = json.dumps(value)
    res, text = invoke_render(tmp_path, legacy_doc(raw))
    line = line_of(text, "- name: DYN_DEPLOYMENT_CONFIG") + 1
    refused(res, f"dgd.yaml:{line}: DynamoGraphDeployment/legacy: ", f"{ENV}: {message}")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[1, 2]", f"{ENV} must be a JSON object keyed by service, found an array"),
        ('"x"', f"{ENV} must be a JSON object keyed by service, found a string"),
        ("null", f"{ENV} must be a JSON object keyed by service, found null"),
        ('{"Worker": ', f"{ENV} is not valid JSON: not JSON: Expecting value (line 1, column 12)"),
        (
            '{"Worker": {"x": NaN}}',
            f"{ENV} is not valid JSON: Worker.<a key>: NaN and infinity are not JSON numbers",
        ),
        ("[" * 500 + "]" * 500, f"{ENV} is not valid JSON: nested more than"),
        ('{"Worker": ' + "9" * 5000 + "}", f"{ENV} is not valid JSON"),
    ],
)
def test_json_that_is_no_config_is_an_input_error(tmp_path: Path, raw: str, message: str) -> None:
    res, _ = invoke_render(tmp_path, legacy_doc(raw))
    refused(res, f"spec.services.{WORKER}.envs[1].value: {message}")
    assert "9" * 50 not in res.stderr


def test_valid_config_keys_match_case_insensitively(tmp_path: Path) -> None:
    """Go's encoding/json matches struct fields case-insensitively; other keys are
    ignored (a frontend's entry keeps them, with its port)."""
    raw = json.dumps(
        {
            WORKER: {
                "serviceARGS": {"WORKERS": 4, "Resources": {"Custom": {"a.io/x": "2"}}},
                "other": [1],
            },
            "Planner": {"environment": "kubernetes"},
        }
    )
    res, _ = invoke_render(tmp_path, legacy_doc(raw))
    assert res.code == 0, res.stderr
    assert desired_replicas(res.stdout) == ["4"]
    [dep] = [
        o
        for o in yaml.safe_load_all(res.stdout)
        if o and o["kind"] == "Deployment" and "worker" in o["metadata"]["name"]
    ]
    main = dep["spec"]["template"]["spec"]["containers"][0]
    assert main["resources"]["requests"]["a.io/x"] == "2"
    assert main["resources"]["limits"]["a.io/x"] == "2"


def test_a_grove_clique_does_not_read_the_config(tmp_path: Path) -> None:
    """On the Grove pathway no DCD is generated, so nothing applies the config (as the
    operator's Grove renderer): it is not checked either."""
    res, _ = invoke_render(tmp_path, legacy_doc(config(10**12)), "--grove")
    assert res.code == 0, res.stderr


# ----------------------------------------------------------------------------- secrets
QUANTITY = "is not a Kubernetes quantity"
SECRET_CONFIGS = [
    # a bad quantity that is a credential (before: quoted in the message)
    (args(resources={"cpu": SECRET}), f"Worker.ServiceArgs.resources.cpu: {QUANTITY}"),
    (
        args(resources={"custom": {"a.io/x": SECRET}}),
        f"Worker.ServiceArgs.resources.custom.<key 1>: {QUANTITY}",
    ),
    # a key that is no resource name, nor a service of the DGD
    (
        args(resources={"custom": {f"{SECRET}=": "1"}}),
        "Worker.ServiceArgs.resources.custom.<key 1>: its key is not a resource name",
    ),
    ({SECRET: args(workers=20_000)[WORKER]}, f"<key 1>.ServiceArgs.workers: {LIMIT}"),
    ({"a": 1, SECRET: 5}, f"<key 2>: {OBJECT} a number"),
]


@pytest.mark.parametrize(("value", "message"), SECRET_CONFIGS)
def test_no_problem_message_contains_any_part_of_the_env_value(
    tmp_path: Path, value: Obj, message: str
) -> None:
    res, _ = invoke_render(tmp_path, legacy_doc(json.dumps(value)))
    refused(res, f"{ENV}: {message}")
    assert SECRET not in res.stderr and SECRET[:8] not in res.stderr


def test_no_json_error_contains_any_part_of_the_env_value(tmp_path: Path) -> None:
    for raw in (f'{{"{SECRET}": ', f'{{"a": "{SECRET}\x01"}}', f'{{"a": {SECRET}}}'):
        res, _ = invoke_render(tmp_path, legacy_doc(raw))
        refused(res, f"{ENV} is not valid JSON: ")
        assert SECRET[:8] not in res.stderr, res.stderr


def test_the_real_process_refuses_with_exit_1(tmp_path: Path) -> None:
    (tmp_path / "dgd.yaml").write_text(dump(legacy_doc(config(-5))))
    res = run_cli("render", str(tmp_path))
    refused(res, "must not be negative")
