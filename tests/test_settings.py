"""Render settings: precedence (default < dyn-gitops.yaml < DYN_GITOPS_* < flag) as shown by
``dyn-gitops settings``, rejection of bad values, and what managed-replicas changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliResult, invoke_cli, run_cli
from support.inputs import small_dgd

from dyn_gitops import keys
from dyn_gitops.settings import REGISTRY

DGD = small_dgd("knobs")


def settings_table(res: CliResult) -> dict[str, tuple[str, str]]:
    """``dyn-gitops settings`` output -> {setting: (value, origin)}."""
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    header = lines[0]
    assert header.split() == ["SETTING", "VALUE", "FROM"], header
    value_at, from_at = header.index("VALUE"), header.index("FROM")
    table = {}
    for line in lines[1:]:
        name = line[:value_at].strip()
        table[name] = (line[value_at:from_at].strip(), line[from_at:].strip())
    return table


@pytest.fixture
def src(tmp_path: Path) -> Path:
    (tmp_path / "dgd.yaml").write_text(DGD, encoding="utf-8")
    return tmp_path


def settings_file(src: Path, values: dict[str, Any]) -> None:
    (src / "dyn-gitops.yaml").write_text(yaml.safe_dump(values), encoding="utf-8")


# ----------------------------------------------------------------------------- precedence
def test_defaults(src: Path) -> None:
    table = settings_table(invoke_cli("settings", str(src)))
    assert set(table) == {s.name for s in REGISTRY}
    for spec in REGISTRY:
        value, origin = table[spec.name]
        assert origin == "default", spec.name
        shown = str(spec.default).lower() if isinstance(spec.default, bool) else str(spec.default)
        assert value == (shown or '""'), spec.name


def test_precedence_default_file_env_flag(src: Path) -> None:
    settings_file(
        src,
        {
            "namespace": "from-file",
            "ingress-class": "from-file",
            "operator-release": "from-file",
            "managed-replicas": False,
            "max-documents": 500,
        },
    )
    env = {
        "DYN_GITOPS_INGRESS_CLASS": "from-env",
        "DYN_GITOPS_OPERATOR_RELEASE": "from-env",
        "DYN_GITOPS_MANAGED_REPLICAS": "true",
    }
    table = settings_table(
        invoke_cli(
            "settings",
            str(src),
            "--operator-release",
            "from-flag",
            "--no-managed-replicas",
            env=env,
        )
    )
    assert table["discovery-backend"] == ("kubernetes", "default")
    assert table["namespace"] == ("from-file", "dyn-gitops.yaml key namespace")
    # a limit the repository lowered shows the runner's ceiling beside it
    assert table["max-documents"] == (
        "500",
        "dyn-gitops.yaml key max-documents (at most 20000: default)",
    )
    assert table["ingress-class"] == ("from-env", "environment DYN_GITOPS_INGRESS_CLASS")
    assert table["operator-release"] == ("from-flag", "flag --operator-release")
    assert table["managed-replicas"] == ("false", "flag --managed-replicas")


def test_precedence_through_the_real_entry_point(src: Path) -> None:
    settings_file(src, {"namespace": "from-file", "istio-gateway": "from-file"})
    res = run_cli(
        "settings",
        str(src),
        "--istio-gateway",
        "from-flag",
        env={"DYN_GITOPS_NAMESPACE": "from-env", "DYN_GITOPS_ISTIO_GATEWAY": "env"},
    )
    table = settings_table(res)
    assert table["namespace"] == ("from-env", "environment DYN_GITOPS_NAMESPACE")
    assert table["istio-gateway"] == ("from-flag", "flag --istio-gateway")


def test_the_resolved_setting_is_what_renders(src: Path) -> None:
    """The winner in the table is also the value the render uses."""
    settings_file(src, {"namespace": "from-file"})

    def namespaces(*args: str, env: dict[str, str] | None = None) -> set[str]:
        res = invoke_cli("render", str(src), *args, env=env)
        assert res.code == 0, res.stderr
        return {
            o["metadata"].get("namespace")
            for o in yaml.safe_load_all(res.stdout)
            if o and o["kind"] == "Deployment"
        }

    assert namespaces() == {"from-file"}
    assert namespaces(env={"DYN_GITOPS_NAMESPACE": "from-env"}) == {"from-env"}
    assert namespaces("--namespace", "from-flag", env={"DYN_GITOPS_NAMESPACE": "from-env"}) == {
        "from-flag"
    }


def test_every_setting_has_a_flag_and_an_env_var() -> None:
    res = invoke_cli("render", "--help")
    assert res.code == 0
    for spec in REGISTRY:
        assert spec.cli_flag in res.stdout, spec.name
        assert spec.env_var in res.stdout.replace("\n", "").replace(" ", ""), spec.name


# ----------------------------------------------------------------------------- bad values
BAD_VALUES = [
    ("flag", "discovery-backend", "zookeeper"),
    ("flag", "output-format", "xml"),
    ("flag", "max-file-bytes", "lots"),
    ("flag", "max-yaml-nodes", "-1"),
    ("env", "max-documents", "1e3"),
    ("env", "lws", "maybe"),
    ("env", "discovery-backend", "consul"),
    ("file", "managed-replicas", "sometimes"),
    ("file", "output-format", "toml"),
    ("file", "max-file-bytes", -5),
    ("file", "namespace", ["a", "b"]),  # not a scalar
    ("file", "ingress-class", {"name": "nginx"}),  # not a scalar
]


@pytest.mark.parametrize(
    ("where", "name", "value"),
    BAD_VALUES,
    ids=[
        f"{w}-{n}-{v if isinstance(v, (str, int)) else type(v).__name__}" for w, n, v in BAD_VALUES
    ],
)
@pytest.mark.parametrize("command", ["render", "settings"])
def test_bad_value_is_a_usage_error_naming_the_setting(
    command: str, where: str, name: str, value: Any, src: Path
) -> None:
    args: list[str] = [command, str(src)]
    env: dict[str, str] = {}
    if where == "flag":
        args += [f"--{name}", str(value)]
    elif where == "env":
        env[f"DYN_GITOPS_{name.upper().replace('-', '_')}"] = str(value)
    else:
        settings_file(src, {name: value})
    res = invoke_cli(*args, env=env)
    assert res.code == 2, f"exit {res.code}, stderr:\n{res.stderr}\nstdout:\n{res.stdout[:300]}"
    assert res.stdout == ""
    assert name in res.stderr, res.stderr
    if where == "env":
        assert env and next(iter(env)) in res.stderr
    if where == "file":
        assert "dyn-gitops.yaml" in res.stderr


def test_unknown_key_in_the_settings_file_is_a_usage_error(src: Path) -> None:
    """(Unknown flags and variables: test_bad_input.)"""
    settings_file(src, {"namespcae": "x"})
    res = invoke_cli("render", str(src))
    assert res.code == 2, res.stderr
    assert res.stdout == ""
    assert "dyn-gitops.yaml" in res.stderr and "namespcae" in res.stderr
    assert "did you mean 'namespace'" in res.stderr, res.stderr


@pytest.mark.parametrize(
    "text", ["- a\n- b\n", "namespace: [unclosed\n"], ids=["not-a-mapping", "malformed"]
)
def test_settings_command_reports_a_broken_settings_file(text: str, src: Path) -> None:
    """`settings` must not print a table of defaults while dyn-gitops.yaml is unusable."""
    (src / "dyn-gitops.yaml").write_text(text, encoding="utf-8")
    assert invoke_cli("render", str(src)).code == 1
    res = invoke_cli("settings", str(src))
    assert res.code in (1, 2), f"exit {res.code}; stdout:\n{res.stdout}"
    assert res.stdout == ""
    assert "dyn-gitops.yaml" in res.stderr


def test_debug_variable_is_not_a_setting(src: Path) -> None:
    """The CLI's own hint says DYN_GITOPS_DEBUG=1 gives a traceback on internal errors; it
    must not turn every run into 'unknown setting'."""
    res = run_cli("render", str(src), env={"DYN_GITOPS_DEBUG": "1"})
    assert res.code == 0, res.stderr


# ----------------------------------------------------------------------------- managed-replicas
def deployments(src: Path, *args: str) -> dict[str, dict[str, Any]]:
    res = invoke_cli("render", str(src), *args)
    assert res.code == 0, res.stderr
    return {
        o["metadata"]["labels"][keys.LABEL_COMPONENT]: o
        for o in yaml.safe_load_all(res.stdout)
        if o and o["kind"] == "Deployment"
    }


CONTROLLER_ANNOTATIONS = (
    keys.ANN_MANAGED_REPLICAS,
    keys.ANN_DESIRED_REPLICAS,
    keys.ANN_FLUX_PRUNE,
    keys.ANN_ARGOCD_COMPARE_OPTIONS,
)


def test_managed_replicas_on_hands_worker_replicas_to_the_controller(src: Path) -> None:
    deps = deployments(src)  # on by default
    assert deployments(src, "--managed-replicas") == deps
    worker = deps["VllmWorker"]
    ann = worker["metadata"]["annotations"]
    assert "replicas" not in worker["spec"], "spec.replicas belongs to the controller"
    assert ann[keys.ANN_DESIRED_REPLICAS] == "3"
    assert ann[keys.ANN_MANAGED_REPLICAS] == "true"
    assert keys.ARGOCD_PRUNE_FALSE in ann[keys.ANN_ARGOCD_SYNC_OPTIONS].split(",")
    assert ann[keys.ANN_ARGOCD_COMPARE_OPTIONS] == keys.ARGOCD_IGNORE_EXTRANEOUS
    assert ann[keys.ANN_FLUX_PRUNE] == keys.FLUX_PRUNE_DISABLED

    frontend = deps["Frontend"]  # not a worker: Git keeps spec.replicas
    assert frontend["spec"]["replicas"] == 2
    f_ann = frontend["metadata"].get("annotations") or {}
    assert not {*CONTROLLER_ANNOTATIONS, keys.ANN_ARGOCD_SYNC_OPTIONS} & set(f_ann)


def test_managed_replicas_off_keeps_replicas_in_git(src: Path) -> None:
    deps = deployments(src, "--no-managed-replicas")
    for component, replicas in (("VllmWorker", 3), ("Frontend", 2)):
        dep = deps[component]
        assert dep["spec"]["replicas"] == replicas, component
        ann = dep["metadata"].get("annotations") or {}
        assert not set(CONTROLLER_ANNOTATIONS) & set(ann), (component, ann)
        assert keys.ARGOCD_PRUNE_FALSE not in ann.get(keys.ANN_ARGOCD_SYNC_OPTIONS, ""), component


def test_managed_replicas_keeps_a_users_sync_options(src: Path) -> None:
    text = DGD.replace(
        "      replicas: 3\n",
        "      replicas: 3\n      annotations:\n"
        f"        {keys.ANN_ARGOCD_SYNC_OPTIONS}: ServerSideApply=true\n",
    )
    (src / "dgd.yaml").write_text(text, encoding="utf-8")
    opts = deployments(src)["VllmWorker"]["metadata"]["annotations"][keys.ANN_ARGOCD_SYNC_OPTIONS]
    assert set(opts.split(",")) == {"ServerSideApply=true", keys.ARGOCD_PRUNE_FALSE}


def test_managed_replicas_from_the_settings_file(src: Path) -> None:
    settings_file(src, {"managed-replicas": False})
    assert deployments(src)["VllmWorker"]["spec"]["replicas"] == 3
    assert "replicas" not in deployments(src, "--managed-replicas")["VllmWorker"]["spec"]
