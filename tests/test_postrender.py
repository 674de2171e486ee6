"""``dyn-gitops post-render``: the Helm post-renderer, and its Helm 4 plugin.

Helm 4 marks each document with the annotation ``postrenderer.helm.sh/postrender-filename``
and Helm 3 with a ``# Source:`` comment; both are read back. The end-to-end tests run the
real ``helm`` with the plugin from ``charts/helm-plugin`` installed into a private
HELM_DATA_HOME.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.paths import REPO
from support.rendering import render

from dyn_gitops import __version__
from dyn_gitops.workflows.postrender import HELM_FILENAME, split

CHART = REPO / "tests" / "data" / "workflows" / "chart"
PLUGIN = REPO / "charts" / "helm-plugin"
AGG = REPO / "tests" / "data" / "workflows" / "tree" / "agg.yaml"
SOURCE_PATH = "dyn-gitops.io/source-path"


def helm4_stream(*docs: tuple[str, str]) -> str:
    """What Helm 4 writes to a post-renderer: documents annotated with their template."""
    out = []
    for template, text in docs:
        obj = yaml.safe_load(text)
        obj["metadata"].setdefault("annotations", {})[HELM_FILENAME] = template
        out.append(yaml.safe_dump(obj, sort_keys=False))
    return "---\n".join(out)


CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: demo\ndata:\n  a: b\n"


def without(objs: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    out = copy.deepcopy(objs)
    for o in out:
        ann = o["metadata"].get("annotations") or {}
        for k in keys:
            ann.pop(k, None)
        if not ann:
            o["metadata"].pop("annotations", None)
    return out


# ---------------------------------------------------------------------------- splitting
def test_split_groups_documents_by_template() -> None:
    helm3 = (
        "---\n# Source: app/templates/a.yaml\nkind: A\n---\n# Source: app/templates/b.yaml"
        "\nkind: B\n---\n# Source: app/templates/a.yaml\nkind: A2\n"
    )
    files = split(helm3)
    assert [f.path for f in files] == ["app/templates/a.yaml", "app/templates/b.yaml"]
    assert files[0].text.count("---") == 2  # both documents of a.yaml, still two documents
    helm4 = helm4_stream(("app/templates/cm.yaml", CM))
    assert [f.path for f in split(helm4)] == ["app/templates/cm.yaml"]
    assert [f.path for f in split("kind: A\n---\nkind: B\n")] == ["-"]


# ---------------------------------------------------------------------------- the command
def test_graphs_are_expanded_and_filed_under_their_template() -> None:
    stream = helm4_stream(
        ("app/templates/dgd.yaml", AGG.read_text()), ("app/templates/cm.yaml", CM)
    )
    res = run_cli("post-render", "--namespace", "demo", stdin=stream)
    assert res.code == 0, res.stderr
    objs = list(yaml.safe_load_all(res.stdout))
    cm = [o for o in objs if o["kind"] == "ConfigMap"]
    assert cm == [yaml.safe_load(helm4_stream(("app/templates/cm.yaml", CM)))]  # untouched
    rendered = [o for o in objs if o["kind"] != "ConfigMap"]
    expected = render(AGG, namespace="demo")
    assert without(rendered, SOURCE_PATH, HELM_FILENAME) == without(expected, SOURCE_PATH)
    for o in rendered:
        ann = o["metadata"]["annotations"]
        assert ann[SOURCE_PATH] == "app/templates/dgd.yaml"
        assert ann[HELM_FILENAME] == "app/templates/dgd.yaml"  # Helm files it there


def test_helm3_input_gets_no_helm4_annotation() -> None:
    stream = "---\n# Source: app/templates/dgd.yaml\n" + AGG.read_text()
    res = run_cli("post-render", "--namespace", "demo", stdin=stream)
    assert res.code == 0, res.stderr
    assert HELM_FILENAME not in res.stdout
    assert f"{SOURCE_PATH}: app/templates/dgd.yaml" in res.stdout


def test_a_bad_graph_names_its_template_and_prints_nothing() -> None:
    bad = AGG.read_text().replace("replicas: 2", "replica: 2")
    res = run_cli("post-render", stdin=helm4_stream(("app/templates/dgd.yaml", bad)))
    assert res.code == 1 and res.stdout == ""
    assert res.stderr.startswith("app/templates/dgd.yaml:")
    assert "unknown field 'replica'" in res.stderr


def test_empty_input_is_refused_unless_allowed() -> None:
    assert run_cli("post-render", stdin="").code == 1
    allowed = run_cli("post-render", "--allow-empty", stdin="")
    assert allowed.code == 0 and allowed.stdout == ""


def test_the_plugin_matches_this_version() -> None:
    plugin = yaml.safe_load((PLUGIN / "plugin.yaml").read_text())
    assert plugin["apiVersion"] == "v1" and plugin["type"] == "postrenderer/v1"
    assert plugin["runtime"] == "subprocess"
    assert plugin["version"] == __version__
    command = plugin["runtimeConfig"]["platformCommand"][0]
    assert [command["command"], *command["args"]] == ["dyn-gitops", "post-render"]


# ---------------------------------------------------------------------------- real helm
@pytest.fixture
def helm(test_binaries: Any, tmp_path: Path) -> Any:
    """Run the real helm with the plugin installed in private Helm directories."""
    binary = test_binaries("helm")["helm"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DYN_GITOPS_", "HELM_"))}
    env.update(
        HELM_CONFIG_HOME=str(tmp_path / "config"),
        HELM_DATA_HOME=str(tmp_path / "data"),
        HELM_CACHE_HOME=str(tmp_path / "cache"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binary), *args], capture_output=True, text=True, env=env, timeout=120
        )

    installed = run("plugin", "install", str(PLUGIN))
    assert installed.returncode == 0, installed.stderr
    return run


@pytest.mark.realk8s
def test_helm4_plugin_expands_a_chart(helm: Any, tmp_path: Path) -> None:
    listed = helm("plugin", "list").stdout
    assert "dyn-gitops" in listed and "postrenderer/v1" in listed
    proc = helm(
        "template",
        "rel",
        str(CHART),
        "--post-renderer",
        "dyn-gitops",
        "--post-renderer-args",
        "--namespace=demo",
    )
    assert proc.returncode == 0, proc.stderr
    objs = [o for o in yaml.safe_load_all(proc.stdout) if o]
    plain = helm("template", "rel", str(CHART)).stdout
    dgd = next(d for d in yaml.safe_load_all(plain) if d["kind"] == "DynamoGraphDeployment")
    (tmp_path / "dgd.yaml").write_text(yaml.safe_dump(dgd))
    expected = render(tmp_path / "dgd.yaml", namespace="demo")
    rendered = [o for o in objs if o["kind"] != "ConfigMap"]
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(without(rendered, SOURCE_PATH), key=key) == sorted(
        without(expected, SOURCE_PATH), key=key
    )
    # the source DGD comes back in v1beta1 (setting source-api-version)
    [emitted] = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    assert emitted["apiVersion"] == "nvidia.com/v1beta1" and "components" in emitted["spec"]
    # Helm read our annotation back (children filed under the graph's template) and removed it
    assert HELM_FILENAME not in proc.stdout
    sources = [line for line in proc.stdout.splitlines() if line.startswith("# Source:")]
    assert "generated-by-postrender" not in "".join(sources)
    assert sources.count("# Source: dynamo-app/templates/dgd.yaml") == len(rendered)


@pytest.mark.realk8s
def test_helm_fails_on_a_bad_graph(helm: Any) -> None:
    proc = helm(
        "template", "rel", str(CHART), "--set", "workers=two", "--post-renderer", "dyn-gitops"
    )
    assert proc.returncode != 0 and proc.stdout == ""
    assert 'plugin "dyn-gitops" exited with error' in proc.stderr
    # Helm 4 drops the plugin's stderr; the documented way to see why shows it
    plain = helm("template", "rel", str(CHART), "--set", "workers=two")
    why = run_cli("post-render", stdin=plain.stdout)
    assert why.code == 1 and why.stderr.startswith("dynamo-app/templates/dgd.yaml:")
    assert "(found 'two')" in why.stderr
