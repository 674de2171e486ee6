"""The CLI for people and for scripts (issue 26, point 7): ``-o json|yaml`` reports of
validate, settings and explain (one documented schema each), short flags, shell
completion, ``--help`` in sections, and links instead of repository paths."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from support.cli import CliResult, invoke_cli, run_cli
from support.inputs import frontend_dgd

from dyn_gitops.settings import REGISTRY

DGD = frontend_dgd("reported")
PROBLEM_KEYS = {"file", "line", "object", "field", "path", "message", "severity"}


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "dgd.yaml").write_text(DGD)
    return tmp_path


def data(res: CliResult, fmt: str) -> Any:
    assert "Traceback" not in res.stderr, res.stderr
    return json.loads(res.stdout) if fmt == "json" else yaml.safe_load(res.stdout)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_validate_reports_problems_as_data(app: Path, fmt: str) -> None:
    """On main: exit 2, "No such option: -o"."""
    (app / "bad.yaml").write_text(
        DGD.replace("reported", "bad").replace("replicas: 1", "replicas: -1")
    )
    res = run_cli("validate", "-o", fmt, str(app))
    assert res.code == 1, res.stderr
    report = data(res, fmt)
    assert report["kind"] == "ValidationReport" and report["schemaVersion"] == 1
    assert report["valid"] is False
    (problem,) = report["problems"]
    assert set(problem) == PROBLEM_KEYS
    assert problem["file"] == "bad.yaml"
    assert problem["object"] == "DynamoGraphDeployment/bad"
    assert problem["path"] == ["spec", "services", "Frontend", "replicas"]
    assert problem["field"] == "spec.services.Frontend.replicas"
    assert isinstance(problem["line"], int) and problem["line"] > 1
    assert problem["severity"] == "error"


def test_validate_reports_a_valid_input_and_a_usage_error_as_data(app: Path) -> None:
    ok = run_cli("validate", "--output", "json", str(app))
    assert ok.code == 0, ok.stderr
    report = data(ok, "json")
    assert (report["valid"], report["files"], report["graphs"]) == (True, 1, 1)
    assert report["objects"] > 0 and report["problems"] == [] and report["skipped"] == []
    bad = invoke_cli("validate", "-o", "yaml", str(app), "--discovery-backend", "etcd", "-n", "A")
    assert bad.code == 2
    assert set(data(bad, "yaml")["problems"][0]) == PROBLEM_KEYS
    assert "namespace" in data(bad, "yaml")["problems"][0]["message"]


def test_json_and_yaml_reports_are_the_same_data(app: Path) -> None:
    for command in (("validate",), ("settings",), ("explain", "reported", "Frontend")):
        as_json = data(invoke_cli(*command, str(app), "-o", "json"), "json")
        assert as_json == data(invoke_cli(*command, str(app), "-o", "yaml"), "yaml"), command


def test_settings_as_data(app: Path) -> None:
    """On main: exit 2, "No such option: -o"."""
    res = run_cli("settings", str(app), "-o", "json", "-n", "team-a")
    assert res.code == 0, res.stderr
    rows = {r["name"]: r for r in data(res, "json")["settings"]}
    assert list(rows) == [s.name for s in REGISTRY]
    assert rows["namespace"] == {"name": "namespace", "value": "team-a", "from": "flag --namespace"}
    assert rows["managed-replicas"]["value"] is True  # typed, not the table's text


def test_explain_as_data(app: Path) -> None:
    """On main: exit 2, "No such option: -o"."""
    res = run_cli("explain", "reported", "Frontend", str(app), "-o", "json")
    assert res.code == 0, res.stderr
    report = data(res, "json")
    assert (report["kind"], report["graph"], report["service"]) == (
        "Explanation",
        "reported",
        "Frontend",
    )
    assert report["componentType"] == "frontend"
    items = report["items"]
    assert items and set(items[0]) == {"workload", "container", "item", "name", "from"}
    assert any(i["item"] == "env" for i in items)


@pytest.mark.parametrize("command", [("validate",), ("settings",), ("explain", "x", "y")])
def test_an_output_format_not_allowed_is_a_usage_error(app: Path, command: tuple[str, ...]) -> None:
    res = run_cli(*command, str(app), "-o", "xml")
    assert res.code == 2 and res.stdout == ""
    assert "Invalid value for '-o' / '--output': 'xml' is not one of 'text', 'json', 'yaml'" in (
        res.stderr
    )
    assert "Traceback" not in res.stderr


def test_short_flags_for_namespace_and_output(app: Path) -> None:
    """-n is --namespace and -o --output-format in render (on main: "No such option")."""
    res = run_cli("render", str(app), "-n", "team-a", "-o", "json")
    assert res.code == 0, res.stderr
    objects = json.loads(res.stdout)["items"]
    assert {o["metadata"].get("namespace") for o in objects} == {"team-a"}


# ---------------------------------------------------------------------------- completion
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_each_shell(shell: str) -> None:
    """On main: exit 2, "No such command 'completion'"."""
    res = run_cli("completion", shell)
    assert res.code == 0, res.stderr
    assert "_DYN_GITOPS_COMPLETE" in res.stdout
    assert (
        f"{shell}_complete" in res.stdout or f"{shell}_source" in res.stdout or shell in res.stdout
    )


def test_the_completion_script_is_answered_by_the_cli() -> None:
    """What the bash script asks (the variable, the words so far) is answered with the
    commands and options that fit."""
    env = {
        "_DYN_GITOPS_COMPLETE": "bash_complete",
        "COMP_WORDS": "dyn-gitops val",
        "COMP_CWORD": "1",
    }
    res = run_cli(env=env)
    assert res.code == 0, res.stderr
    assert "plain,validate" in res.stdout.splitlines()
    env = {**env, "COMP_WORDS": "dyn-gitops validate --out", "COMP_CWORD": "2"}
    assert "plain,--output" in run_cli(env=env).stdout.splitlines()


def test_completion_of_an_unknown_shell_is_a_usage_error() -> None:
    res = run_cli("completion", "powershell")
    assert res.code == 2 and res.stdout == "" and "Traceback" not in res.stderr


# ---------------------------------------------------------------------------- --help
def _all_commands() -> list[tuple[str, ...]]:
    from dyn_gitops.cli import main

    out: list[tuple[str, ...]] = [()]
    for name, cmd in main.commands.items():
        out.append((name,))
        if isinstance(cmd, click.Group):
            out += [(name, sub) for sub in cmd.commands]
    return out


def test_help_is_in_sections() -> None:
    """On main: render --help lists every option under one "Options:" heading."""
    text = invoke_cli("render", "--help").stdout
    headings = [line for line in text.splitlines() if re.fullmatch(r"\S.*:", line)]
    assert headings == [
        "Input:",
        "Output:",
        "Render settings:",
        "Limits (only flags and the environment may raise them):",
        "Options:",
    ]
    options = text.split("\nOptions:\n")[1]
    assert "--help" in options and "--namespace" not in options


@pytest.mark.parametrize("command", _all_commands(), ids=lambda c: " ".join(c) or "main")
def test_help_links_to_the_docs_instead_of_repository_paths(command: tuple[str, ...]) -> None:
    """Every repository path named in --help (docs/argocd.md: not in the wheel) comes with
    its URL (on main: cmp --help names docs/argocd.md, render's --namespace-shared too)."""
    res = invoke_cli(*command, "--help")
    assert res.code == 0, res.stderr
    flat = re.sub(r"\s+", " ", res.stdout)
    for path in re.findall(r"(?<![\w/.:-])((?:docs|charts|samples|deploy)/[\w./-]*\w)", flat):
        assert f"https://github.com/dyn-gitops/dyn-gitops/blob/main/{path}" in res.stdout, path


def test_usage_names_the_program() -> None:
    res = run_cli("render", "--no-such-flag")
    assert res.code == 2
    assert res.stderr.startswith("Usage: dyn-gitops render"), res.stderr


def test_the_documented_schema_lists_every_field() -> None:
    """docs/cli.md documents each report's fields."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    for name in (*PROBLEM_KEYS, "ValidationReport", "Settings", "Explanation", "schemaVersion"):
        assert f"`{name}`" in doc, name
    assert os.path.basename(".dyn-gitops-ignore") in doc
