"""Redaction on structure, not on text (issue 25, point 4).

A secret can hide inside a string that holds a document of its own: the ``nvidia.com/dgd-spec``
annotation of the emitted DGD (a v1alpha1 spec as JSON, env values included), a
``DYN_DEPLOYMENT_CONFIG`` env value, any annotation written as JSON. Unique values are planted
in every env value of several conformance examples (:mod:`support.planted`); no output but
``render``'s own shows one: not ``diff`` (text, Markdown), ``explain``, ``validate``,
``settings``, ``hydrate``'s logs and commits, nor the problems of ``render``, ``validate``,
KRM and the Argo CD plugin. Render itself is never redacted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.inputs import resource_list
from support.paths import CONFORMANCE
from support.planted import CREDENTIAL_ENVS, Planter, found_in, plant

from dyn_gitops.display import REDACTED, describe
from dyn_gitops.workflows.diff import field_changes

#: v1alpha1 and v1beta1, agg and disagg, one with envs of its own, one with a planner
EXAMPLES = (
    "examples__backends__vllm__deploy__agg.yaml",
    "examples__backends__vllm__deploy__v1beta1__agg.yaml",
    "examples__backends__sglang__deploy__v1beta1__disagg.yaml",
    "recipes__qwen3-32b__vllm__disagg-kv-router__deploy.yaml",
    "examples__backends__trtllm__deploy__agg-with-config.yaml",
    "examples__backends__vllm__deploy__disagg_planner.yaml",
)
#: the placeholder images of the examples render as applied (no stamp, no 1.5 admission)
SETTINGS = "runtime-version-admission: lenient\norigin-version: none\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return proc.stdout.strip()


def _planted_docs(planter: Planter) -> dict[str, list[dict[str, Any]]]:
    """Each example with planted env values, in a namespace of its own (names repeat)."""
    out = {}
    for i, name in enumerate(EXAMPLES):
        docs = [d for d in yaml.safe_load_all((CONFORMANCE / name).read_text()) if d]
        for d in docs:
            d.setdefault("metadata", {})["namespace"] = f"ns{i}"
        out[name] = [plant(d, planter) if d["kind"] == "DynamoGraphDeployment" else d for d in docs]
    return out


def _write(tree: Path, files: dict[str, list[dict[str, Any]]]) -> None:
    """One directory per file (a diff of one of them stays under the Markdown size limit),
    each with the settings."""
    (tree / "dyn-gitops.yaml").write_text(SETTINGS)
    for name, docs in files.items():
        sub = tree / _dir(name)
        sub.mkdir(exist_ok=True)
        (sub / "dyn-gitops.yaml").write_text(SETTINGS)
        (sub / name).write_text(yaml.safe_dump_all(docs, sort_keys=False))


def _dir(name: str) -> str:
    return f"ex{EXAMPLES.index(name)}" if name in EXAMPLES else Path(name).stem


class Planted:
    """A Git repository: ``base`` the planted examples; ``head`` every credential value
    rotated, one replica count changed, and a DGD added (credentials only, so its whole
    YAML in the Markdown report has nothing plain to show)."""

    def __init__(self, root: Path) -> None:
        self.repo, self.tree = root, root / "deploy"
        self.tree.mkdir(parents=True)
        _git(root, "init", "-q", "-b", "main")
        self.base, self.head = Planter("a"), Planter("b")
        _write(self.tree, _planted_docs(self.base))
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "base")
        _git(root, "tag", "base")
        head = _planted_docs(self.head)
        head[EXAMPLES[0]][0]["spec"]["services"]["Frontend"]["replicas"] = 3
        added = yaml.safe_load((CONFORMANCE / EXAMPLES[0]).read_text())
        added["metadata"] = {"name": "added", "namespace": "added"}
        head["added.yaml"] = [plant(added, self.head, plain=False)]
        _write(self.tree, head)
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "head")
        self.values = self.base.values | self.head.values


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    return Planted(tmp_path_factory.mktemp("planted"))


def _clean(res: Any, values: set[str]) -> None:
    assert not found_in(res.stdout + res.stderr, values), res.stdout[-3000:] + res.stderr[-3000:]


# ---------------------------------------------------------------------------- outputs
def test_render_shows_every_planted_value(planted: Planted) -> None:
    """Render is never redacted: its objects carry every value (so the tests below would
    see one if any leaked)."""
    res = run_cli("render", "deploy", cwd=planted.repo)
    assert res.code == 0, res.stderr
    assert found_in(res.stdout, planted.head.values) == sorted(planted.head.values)
    assert not found_in(res.stderr, planted.values)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_diff_shows_no_planted_value(planted: Planted, fmt: str) -> None:
    """Before, the ``nvidia.com/dgd-spec`` annotation (the v1alpha1 spec as JSON) and the
    ``DYN_DEPLOYMENT_CONFIG`` value were shown whole: every credential env value in them.
    Now they are compared field by field, so the change is there without the values."""
    for path in ("deploy", "deploy/ex0", "deploy/added"):
        res = run_cli("diff", "--base", "base", "--format", fmt, path, cwd=planted.repo)
        assert res.code == 1, res.stderr
        _clean(res, planted.values)
    res = run_cli("diff", "--base", "base", "--format", fmt, "deploy/ex0", cwd=planted.repo)
    if fmt == "text":
        lines = res.stdout.splitlines()
        inside = [ln for ln in lines if '["nvidia.com/dgd-spec"]{json}' in ln]
        assert any(
            ln.endswith("envs[name=HF_TOKEN].value: (redacted) -> (redacted)") for ln in inside
        ), res.stdout
        legacy = [ln for ln in lines if "env[name=DYN_DEPLOYMENT_CONFIG].value{json}" in ln]
        assert any(".Common.hf_token: (redacted) -> (redacted)" in ln for ln in legacy), res.stdout
        assert "    ~ spec.components[name=Frontend].replicas: 1 -> 3" in lines
    else:
        assert "dgd-spec&quot;]{json}" in res.stdout or 'dgd-spec"]{json}' in res.stdout
        added = run_cli("diff", "--base", "base", "--format", fmt, "deploy/added", cwd=planted.repo)
        assert "| + | DynamoGraphDeployment | added | added |" in added.stdout
        for name in CREDENTIAL_ENVS:  # the added DGD's YAML names them, values redacted
            assert f"- name: {name}\n" in added.stdout, added.stdout


def test_explain_shows_no_planted_value(planted: Planted) -> None:
    for where, service in (("ex0", "worker"), ("ex0", "Frontend"), ("ex1", "VllmDecodeWorker")):
        res = run_cli("explain", "vllm-agg", service, f"deploy/{where}", cwd=planted.repo)
        assert res.code == 0, res.stderr
        assert "HF_TOKEN" in res.stdout
        _clean(res, planted.values)


def test_validate_settings_and_hydrate_show_no_planted_value(planted: Planted) -> None:
    for args in (("validate", "deploy"), ("settings", "deploy")):
        res = run_cli(*args, cwd=planted.repo)
        assert res.code == 0, res.stderr
        _clean(res, planted.values)
    res = run_cli("hydrate", "deploy", cwd=planted.repo, env={"HOME": str(planted.repo)})
    assert res.code == 0, res.stderr
    _clean(res, planted.values)
    log = _git(planted.repo, "log", "--format=%B", "rendered")
    assert "dyn-gitops" in log and not found_in(log, planted.values)


# ---------------------------------------------------------------------------- problems
def _broken(planted: Planted, tmp: Path) -> Path:
    """The head tree with one error in a planted DGD (a replica count that is no number)."""
    tree = tmp / "broken"
    shutil.copytree(planted.tree, tree)
    path = tree / "ex0" / EXAMPLES[0]
    path.write_text(path.read_text().replace("replicas: 3", "replicas: lots", 1))
    return tree


def test_an_injected_error_shows_no_planted_value(planted: Planted, tmp_path: Path) -> None:
    tree = _broken(planted, tmp_path)
    for command in ("render", "validate"):
        res = run_cli(command, str(tree))
        assert res.code == 1 and res.stdout == "", res.stderr
        assert "Frontend.replicas" in res.stderr
        _clean(res, planted.values)
    res = run_cli("cmp", "generate", "--server", "off", cwd=tree, env={"TMPDIR": "/nonexistent"})
    assert res.code == 1 and res.stdout == "" and "Frontend.replicas" in res.stderr
    _clean(res, planted.values)


def test_krm_results_show_no_planted_value(planted: Planted, tmp_path: Path) -> None:
    tree = _broken(planted, tmp_path)
    files = sorted(f for f in tree.rglob("*.yaml") if f.name != "dyn-gitops.yaml")
    items = [d for f in files for d in yaml.safe_load_all(f.read_text())]
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "fn"},
        "data": yaml.safe_load(SETTINGS),
    }
    res = run_cli("krm", stdin=resource_list([d for d in items if d.get("kind")], config))
    assert res.code == 1, res.stderr
    results = yaml.safe_load(res.stdout)["results"]
    assert any(r["field"]["path"].endswith("Frontend.replicas") for r in results), results
    assert not found_in(yaml.safe_dump(results) + res.stderr, planted.values)


# ---------------------------------------------------------------------------- env values
def _alpha(name: str, **where: Any) -> dict[str, Any]:
    """A small v1alpha1 DGD; ``where``: envs (graph), svc_envs, main_env, annotations."""
    main: dict[str, Any] = {"image": "example.com/dynamo:1.1.0"}
    if "main_env" in where:
        main["env"] = where["main_env"]
    worker: dict[str, Any] = {
        "componentType": "worker",
        "resources": {"limits": {"gpu": "1"}},
        "extraPodSpec": {"mainContainer": main},
    }
    if "svc_envs" in where:
        worker["envs"] = where["svc_envs"]
    spec: dict[str, Any] = {"services": {"VllmWorker": worker}}
    if "envs" in where:
        spec["envs"] = where["envs"]
    meta: dict[str, Any] = {"name": name, "annotations": where.get("annotations") or {}}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": meta,
        "spec": spec,
    }


def _beta(name: str, **where: Any) -> dict[str, Any]:
    """A small v1beta1 DGD; ``where``: env (graph), container_env, annotations."""
    container: dict[str, Any] = {"name": "main", "image": "example.com/dynamo:1.1.0"}
    if "container_env" in where:
        container["env"] = where["container_env"]
    component = {
        "name": "Frontend",
        "type": "frontend",
        "podTemplate": {"spec": {"containers": [container]}},
    }
    spec: dict[str, Any] = {"components": [component]}
    if "env" in where:
        spec["env"] = where["env"]
    meta: dict[str, Any] = {"name": name, "annotations": where.get("annotations") or {}}
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": meta,
        "spec": spec,
    }


def _legacy(value: Any) -> list[dict[str, Any]]:
    return [{"name": "DYN_DEPLOYMENT_CONFIG", "value": value}]


def _config(**service_args: Any) -> str:
    return json.dumps({"VllmWorker": {"ServiceArgs": service_args}})


#: case -> (the DGD with one wrong env value, the planted values in it)
WRONG_ENVS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "number": (_alpha("number", envs=[{"name": "HF_TOKEN", "value": 8675309001}]), ("8675309001",)),
    "list": (_alpha("list", envs=[{"name": "DYN_LOG", "value": ["plntlist1q"]}]), ("plntlist1q",)),
    "mapping": (
        _alpha("mapping", svc_envs=[{"name": "X", "value": {"k": "plntmap1q"}}]),
        ("plntmap1q",),
    ),
    "string-entry": (_alpha("string-entry", envs=["HF_TOKEN=plntstr1q"]), ("plntstr1q",)),
    "no-name": (_alpha("no-name", main_env=[{"value": "plntnoname1q"}]), ("plntnoname1q",)),
    "valuefrom-string": (
        _alpha("valuefrom-string", main_env=[{"name": "A", "valueFrom": "plntvf1q"}]),
        ("plntvf1q",),
    ),
    "main-number": (
        _alpha("main-number", main_env=[{"name": "P", "value": 8675309002}]),
        ("8675309002",),
    ),
    "legacy-not-json": (
        _alpha("legacy-not-json", envs=_legacy('{"VllmWorker": plntjson1q')),
        ("plntjson1q",),
    ),
    "legacy-a-string": (_alpha("legacy-a-string", envs=_legacy('"plntjson2q"')), ("plntjson2q",)),
    "legacy-a-list": (_alpha("legacy-a-list", envs=_legacy('["plntjson3q"]')), ("plntjson3q",)),
    "legacy-cpu": (
        _alpha("legacy-cpu", envs=_legacy(_config(resources={"cpu": "plntcpu1q"}))),
        ("plntcpu1q",),
    ),
    "legacy-memory": (
        _alpha("legacy-memory", main_env=_legacy(_config(resources={"memory": "8Gi plntmem1q"}))),
        ("plntmem1q",),
    ),
    "legacy-custom": (
        _alpha(
            "legacy-custom",
            svc_envs=_legacy(_config(resources={"custom": {"example.com/x": "plntcus1q"}})),
        ),
        ("plntcus1q",),
    ),
    "legacy-deep": (
        _alpha("legacy-deep", envs=_legacy("[" * 300 + '"plntdeep1q"' + "]" * 300)),
        ("plntdeep1q",),
    ),
    "legacy-digits": (
        _alpha("legacy-digits", envs=_legacy('{"plntdig1q": ' + "7" * 5000 + "}")),
        ("plntdig1q", "7" * 40),
    ),
    "beta-container-number": (
        _beta("beta-container-number", container_env=[{"name": "HF_TOKEN", "value": 8675309003}]),
        ("8675309003",),
    ),
    "beta-graph-list": (
        _beta("beta-graph-list", env=[{"name": "Y", "value": ["plntbeta1q"]}]),
        ("plntbeta1q",),
    ),
    "beta-legacy-cpu": (
        _beta(
            "beta-legacy-cpu",
            env=_legacy(
                json.dumps({"Frontend": {"ServiceArgs": {"resources": {"cpu": "plntcpu2q"}}}})
            ),
        ),
        ("plntcpu2q",),
    ),
    "beta-dgd-spec": (
        _beta(
            "beta-dgd-spec",
            annotations={
                "nvidia.com/dgd-spec": '{"version":1,"spec":{"envs":'
                '[{"name":"HF_TOKEN","value":"plntspec1q"}], plntspec2q'
            },
        ),
        ("plntspec1q", "plntspec2q"),
    ),
}


#: case -> (an env value as written in YAML that cannot be read, the planted values in it)
UNREADABLE_ENVS = {
    "yaml-int": ("!!int plntyaml1q", ("plntyaml1q",)),
    "yaml-binary": ("!!binary plntyaml2q*", ("plntyaml2q",)),
    "yaml-tag": ("!secret plntyaml3q", ("plntyaml3q",)),
    "yaml-quote": ('"plntyaml4q', ("plntyaml4q",)),
    "yaml-flow": ("{plntyaml5q: [", ("plntyaml5q",)),
}


def _write_wrong_envs(tree: Path) -> dict[str, tuple[str, ...]]:
    """One file per case of :data:`WRONG_ENVS` and :data:`UNREADABLE_ENVS`: case -> values."""
    for case, (dgd, _) in WRONG_ENVS.items():
        dgd["metadata"]["namespace"] = "demo"
        (tree / f"{case}.yaml").write_text(yaml.safe_dump(dgd, sort_keys=False))
    for case, (text, _) in UNREADABLE_ENVS.items():
        dgd = _alpha(case, envs=[{"name": "HF_TOKEN", "value": "VALUE"}])
        dgd["metadata"]["namespace"] = "demo"
        written = yaml.safe_dump(dgd, sort_keys=False).replace("VALUE", text)
        (tree / f"{case}.yaml").write_text(written)
    return {
        **{case: values for case, (_, values) in WRONG_ENVS.items()},
        **{case: values for case, (_, values) in UNREADABLE_ENVS.items()},
    }


def test_no_problem_message_contains_an_env_value(tmp_path: Path) -> None:
    """Env values wrong in many ways, each in a DGD of its own (one run reports them all):
    every one is refused, and no message shows the value, in part or whole (a legacy
    config's resources used to be echoed)."""
    cases = _write_wrong_envs(tmp_path)
    res = run_cli("render", "--runtime-version-admission", "lenient", str(tmp_path))
    assert res.code == 1 and res.stdout == "", res.stderr
    assert "Traceback" not in res.stderr
    for case, values in cases.items():
        assert f"{case}.yaml:" in res.stderr, f"{case}: no problem reported\n{res.stderr}"
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith(f"{case}.yaml:")]
        assert not found_in("\n".join(lines), set(values)), lines


# ---------------------------------------------------------------------------- the rule
SPEC = {
    "version": 1,
    "spec": {
        "envs": [{"name": "HF_TOKEN", "value": "plntu1q"}, {"name": "DYN_LOG", "value": "info"}],
        "services": {
            "W": {
                "annotations": {"team": "ml"},
                "extraPodSpec": {
                    "mainContainer": {
                        "env": [
                            {"name": "API_KEY", "value": "plntu2q"},
                            {
                                "name": "DYN_DEPLOYMENT_CONFIG",
                                "value": '{"C": {"token": "plntu3q"}}',
                            },
                            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                        ]
                    }
                },
            }
        },
    },
}


def test_an_embedded_document_is_redacted_by_its_structure() -> None:
    from dyn_gitops.display import redact_text  # new in issue 25

    text = json.dumps(SPEC)
    shown = redact_text(text)
    assert not found_in(shown, {"plntu1q", "plntu2q", "plntu3q"}), shown
    back = json.loads(shown)["spec"]
    assert back["envs"] == [
        {"name": "HF_TOKEN", "value": REDACTED},
        {"name": "DYN_LOG", "value": "info"},  # plain configuration stays reviewable
    ]
    env = back["services"]["W"]["extraPodSpec"]["mainContainer"]["env"]
    assert json.loads(env[1]["value"]) == {"C": {"token": REDACTED}}  # a document in a document
    assert env[2]["valueFrom"] == {"secretKeyRef": {"name": "s", "key": "k"}}  # a reference
    assert back["services"]["W"]["annotations"] == {"team": "ml"}
    # nothing to hide: the text as it is, byte for byte
    plain = '{"version":1,"spec":{"services":{"W":{"envFromSecret":"hf-token-secret"}}}}'
    assert redact_text(plain) == plain
    for text in ("info", "http://host:8080/x", "--model Qwen/Qwen3-0.6B", "12:30", "[INFO] ok"):
        assert redact_text(text) == text
    # YAML too, by its structure; a script that mentions a token is no document
    assert redact_text("db:\n  password: plntu12q\n  host: x\n") == (
        '{"db":{"password":"(redacted)","host":"x"}}'
    )
    script = "def read():\n    try:\n        token = open(TOKEN_PATH).read()\n    except OSError:\n"
    assert redact_text(script) == script


def test_a_document_that_cannot_be_read_is_hidden_whole_when_it_names_a_credential() -> None:
    from dyn_gitops.display import redact_text  # new in issue 25

    assert redact_text('{"token": "plntu4q"') == REDACTED  # not JSON
    assert redact_text("[" * 100 + '"token"' + "]" * 100) == REDACTED  # too deep
    assert redact_text("a: &x {password: plntu5q}\nb: *x\n") == REDACTED  # YAML alias
    assert redact_text("n: !!int abc\npassword: plntu5q\n") == REDACTED  # YAML, a bad tag
    assert redact_text('{"a": 1') == '{"a": 1'  # nothing credential-like in it
    assert redact_text("db:\n  host: x\n") == "db:\n  host: x\n"
    deep = json.dumps({"token": "plntu11q"})
    for _ in range(6):  # documents in documents, beyond the nesting bound: hidden whole
        deep = json.dumps({"env": [{"name": "CFG", "value": deep}]})
    shown = redact_text(deep)
    assert "plntu11q" not in shown and REDACTED in shown and "CFG" in shown


def test_error_messages_describe_a_document_with_a_credential_inside() -> None:
    assert describe(json.dumps(SPEC), sensitive=False).startswith("a string of ")
    assert describe('{"replicas": 2}', sensitive=False) == "'{\"replicas\": 2}'"


def test_diff_compares_documents_field_by_field_only_when_one_holds_a_credential() -> None:
    def dgd(spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "nvidia.com/v1beta1",
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": "g", "annotations": {"nvidia.com/dgd-spec": json.dumps(spec)}},
        }

    after = json.loads(json.dumps(SPEC).replace("plntu1q", "plntu9q").replace("info", "debug"))
    changes = field_changes(dgd(SPEC), dgd(after))
    inner = 'metadata.annotations["nvidia.com/dgd-spec"]{json}.spec.envs'
    assert [(c.path, c.before, c.after) for c in changes] == [
        (f"{inner}[name=HF_TOKEN].value", REDACTED, REDACTED),
        (f"{inner}[name=DYN_LOG].value", "info", "debug"),
    ]
    plain = {"version": 1, "spec": {"pvcs": [{"name": "a"}]}}
    [whole] = field_changes(dgd(plain), dgd({**plain, "spec": {}}))
    assert whole.path == 'metadata.annotations["nvidia.com/dgd-spec"]'
    assert whole.before == json.dumps(plain)  # as before: no credential, the text whole


def test_diff_redacts_credentials_of_env_entries_compared_by_position() -> None:
    """A list that repeats an env name (or has an entry without one) is compared by
    position; its credential values were shown (the name was only known per named entry)."""

    def env(*values: str) -> dict[str, Any]:
        return {"env": [{"name": "HF_TOKEN", "value": v} for v in values]}

    changes = field_changes(env("plntu6q", "plntu7q"), env("plntu8q", "plntu9q"))
    assert [(c.path, c.before, c.after) for c in changes] == [
        ("env[0].value", REDACTED, REDACTED),
        ("env[1].value", REDACTED, REDACTED),
    ]


def test_an_internal_error_never_repeats_the_exceptions_text(monkeypatch: Any, capsys: Any) -> None:
    """A bug (exit 3) names the exception's type and where it was raised: its text can carry
    input (a pydantic error repeats the value it refused: an env value from a legacy config
    once did)."""
    from pydantic import BaseModel

    from dyn_gitops import cli

    class Model(BaseModel):
        replicas: int

    def boom(**_: Any) -> None:
        Model.model_validate({"replicas": "plntu10q"})

    monkeypatch.setattr(cli, "main", boom)
    with pytest.raises(SystemExit) as info:
        cli.entry()
    err = capsys.readouterr().err
    assert info.value.code == 3
    assert "plntu10q" not in err
    assert err.startswith("dyn-gitops: internal error: ValidationError at "), err
    assert "(set DYN_GITOPS_DEBUG=1 for a traceback; please report it)" in err


def test_the_controller_logs_no_env_value_of_a_live_dgd(caplog: Any) -> None:
    """The companion controller computes the worker hash of live DGDs, whatever they hold;
    what it logs when it cannot names the failure, never an env value (the only log line
    that carries an error about object content; it emits no Events)."""
    import logging

    from dyn_gitops_operator.graph import compute_worker_hash

    env = [
        {"name": "HF_TOKEN", "value": "plntc1q"},
        {
            "name": "DYN_DEPLOYMENT_CONFIG",
            "value": '{"W": {"ServiceArgs": {"workers": "plntc2q"}}}',
        },
        {"name": "A", "value": {"k": "plntc3q"}},
        "B=plntc4q",
    ]
    broken = ({"multinode": {"nodeCount": "x"}}, {"podTemplate": "plntc5q"}, {"replicas": "y"})
    with caplog.at_level(logging.DEBUG):
        for extra in broken:
            component = {
                "name": "W",
                "type": "worker",
                "podTemplate": {"spec": {"containers": [{"name": "main", "env": env}]}},
                **extra,
            }
            compute_worker_hash(
                {
                    "apiVersion": "nvidia.com/v1beta1",
                    "kind": "DynamoGraphDeployment",
                    "metadata": {"name": "g", "namespace": "n"},
                    "spec": {"env": env, "components": [component]},
                }
            )
    assert caplog.records, "the broken DGDs were logged"
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert not found_in(logged, {f"plntc{i}q" for i in range(1, 6)}), logged
