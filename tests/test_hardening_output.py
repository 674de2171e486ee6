"""Hardening of what dyn-gitops prints (issue 11, points 4 and 5).

* secrets are never printed: error messages describe sensitive values by type and size, and
  ``diff`` shows Secret data and credentials as changed keys with ``(redacted)`` values;
* output a reviewer can trust: the Markdown diff cannot be made to hide a later change,
  problem lines and diff lines cannot be forged or colour the terminal, and a failed write to
  stdout (closed pipe, full disk) exits 2 with a short message, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.paths import SAMPLES
from support.workflow_repo import TREE, Repo

from dyn_gitops.display import REDACTED, is_sensitive, printable
from dyn_gitops.errors import Problem
from dyn_gitops.workflows import report
from dyn_gitops.workflows.diff import DiffResult, Side, compare

HOSTILE = "x\n```\n<!--\n</details>\n# Approved\n[LGTM](https://example.com)\n````\n"
ESC = "\x1b[31m"


def dgd(name: str = "g", *, envs: str = "", container: str = "") -> str:
    return (
        f"apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\n"
        f"metadata:\n  name: {name}\n  namespace: demo\nspec:\n{envs}"
        "  services:\n    Frontend:\n      componentType: frontend\n      replicas: 1\n"
        "      extraPodSpec:\n        mainContainer:\n          image: nvcr.io/x:1.1.0\n"
        f"{container}"
    )


def _diff_result(base: list[dict[str, Any]], head: list[dict[str, Any]]) -> DiffResult:
    changes, unchanged = compare(base, head)
    return DiffResult(
        Side("main", "a" * 40, len(base)),
        Side("pr", "b" * 40, len(head)),
        "deploy",
        changes,
        unchanged,
    )


def _deployment(image: str, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    if env is not None:
        container["env"] = env
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def _config_map(name: str, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "demo"},
        "data": data,
        **extra,
    }


# ---------------------------------------------------------------------------- 4: secrets
def test_error_messages_never_echo_env_values_args_or_credentials(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(
        dgd(
            envs="  envs:\n    - name: HF_TOKEN\n      value: 31415926535\n"
            "    - HF_TOKEN=hf_hunter2hunter2\n",
            container="          args: --api-key sk-hunter2hunter2\n"
            "          env:\n            - name: DB_PASSWORD\n"
            "              value: [hunter2hunter2]\n",
        )
    )
    res = run_cli("render", str(tmp_path))
    assert res.code == 1 and res.stdout == "", res.stderr
    for secret in ("31415926535", "hunter2"):
        assert secret not in res.stderr, res.stderr
    # the type (and size) is still there to act on
    assert "spec.envs[0].value: env values must be strings: quote it, found a number" in res.stderr
    assert (
        "spec.envs[1]: Input should be a valid dictionary or instance of EnvVar "
        "(found a string of 26 characters)"
    ) in res.stderr
    assert (
        "mainContainer.args: Input should be a valid list (found a string of 27 characters)"
    ) in res.stderr
    assert "env[0].value: Input should be a valid string (found a list of 1 item)" in res.stderr


def test_a_mapping_in_the_wrong_place_is_never_echoed(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(dgd("{password: hunter2}"))
    res = run_cli("render", str(tmp_path))
    assert res.code == 1 and "hunter2" not in res.stderr, res.stderr
    assert "g.yaml:4: DynamoGraphDeployment/?: metadata.name: expected a string" in res.stderr


def test_harmless_values_are_still_shown_in_errors(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(dgd().replace("replicas: 1", "replicas: lots"))
    res = run_cli("render", str(tmp_path))
    assert res.code == 1 and "(found 'lots')" in res.stderr, res.stderr


def test_the_redaction_rule() -> None:
    assert is_sensitive(("data", "password"), kind="Secret")
    assert is_sensitive(("stringData", "anything"), kind="Secret")
    assert not is_sensitive(("data", "anything"), kind="ConfigMap")
    assert is_sensitive(("spec", "auth", "user"))  # under a credential-named key
    assert is_sensitive(("spec", "apiKey"))
    assert is_sensitive(("spec", "secret"))  # a value named secret
    # references to a Secret are not credentials: a reviewer sees which one is used
    for ref in (
        ("env", 0, "valueFrom", "secretKeyRef", "name"),
        ("envFrom", 0, "secretRef"),
        ("volumes", 0, "secret", "secretName"),
        ("imagePullSecrets", 0, "name"),
    ):
        assert not is_sensitive(ref), ref
    # env values: by the env var's name in diff, always in error messages
    assert is_sensitive(("env", 0, "value"), env_name="HF_TOKEN")
    assert not is_sensitive(("env", 0, "value"), env_name="DYN_LOG")
    assert is_sensitive(("env", 0, "value"), env_name="DYN_LOG", strict=True)
    assert is_sensitive(("args",), strict=True) and not is_sensitive(("args",))


def test_kubectls_last_applied_copy_of_an_object_is_never_shown() -> None:
    """kubectl's last-applied annotation repeats the whole object as one JSON string, so a
    Secret's data or a token env value would reach the diff through it."""
    annotation = "kubectl.kubernetes.io/last-applied-configuration"

    def secret(password: str) -> dict[str, Any]:
        applied = {"apiVersion": "v1", "kind": "Secret", "data": {"password": password}}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "creds",
                "namespace": "demo",
                "annotations": {annotation: json.dumps(applied), "team": "ml"},
            },
            "data": {"password": password},
        }

    def deployment(token: str) -> dict[str, Any]:
        dep = _deployment("img:1", [{"name": "HF_TOKEN", "value": token}])
        dep["metadata"]["annotations"] = {annotation: json.dumps({"env": token})}
        return dep

    d = _diff_result([secret("b2xk"), deployment("hf_old")], [secret("bmV3"), deployment("hf_new")])
    text, md = report.text(d), report.markdown(d)
    for value in ("b2xk", "bmV3", "hf_old", "hf_new"):
        assert value not in text and value not in md, value
    changed = f'    ~ metadata.annotations["{annotation}"]: {REDACTED} -> {REDACTED}'
    assert text.splitlines().count(changed) == 2  # the Secret's and the Deployment's
    assert is_sensitive(("metadata", "annotations", annotation), kind="ConfigMap")
    assert not is_sensitive(("metadata", "annotations", "team"), kind="Secret")


def test_diff_shows_secret_changes_as_keys_with_redacted_values() -> None:
    def secret(data: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "demo"},
            "data": data,
        }

    base = [
        secret({"password": "b2xkLXBhc3N3b3Jk", "user": "YWRtaW4="}),
        _deployment(
            "img:1",
            [{"name": "HF_TOKEN", "value": "hf_oldoldold"}, {"name": "DYN_LOG", "value": "info"}],
        ),
    ]
    head = [
        secret({"password": "bmV3LXBhc3N3b3Jk", "user": "YWRtaW4=", "token": "dG9rZW4="}),
        _deployment(
            "img:1",
            [
                {"name": "HF_TOKEN", "value": "hf_newnewnew"},
                {"name": "DYN_LOG", "value": "debug"},
                {"name": "API_KEY", "value": "sk-added"},
            ],
        ),
        {**secret({"tls.key": "cHJpdmF0ZQ=="}), "metadata": {"name": "new"}},
        _config_map(
            "flags",
            {"a": "b"},
            spec={"args": ["--hf-token", "hf_argargarg", "--api-key=sk-argargarg", "-v"]},
        ),
    ]
    d = _diff_result(base, head)
    text, md = report.text(d), report.markdown(d)
    for secret_value in (
        "bmV3",
        "b2xk",
        "dG9r",
        "hf_old",
        "hf_new",
        "sk-added",
        "cHJp",
        "hf_arg",
        "sk-arg",
    ):
        assert secret_value not in text and secret_value not in md, secret_value
    lines = text.splitlines()
    # the changed and the added key are named, their values are not
    assert f"    ~ data.password: {REDACTED} -> {REDACTED}" in lines
    assert f"    + data.token: {REDACTED}" in lines
    assert not any("data.user" in line for line in lines)  # unchanged: not listed
    assert (
        f"    ~ spec.template.spec.containers[name=main].env[name=HF_TOKEN].value: "
        f"{REDACTED} -> {REDACTED}"
    ) in lines
    assert (
        "    + spec.template.spec.containers[name=main].env[name=API_KEY]: "
        f'{{"name": "API_KEY", "value": "{REDACTED}"}}'
    ) in lines
    # plain configuration stays reviewable
    assert (
        '    ~ spec.template.spec.containers[name=main].env[name=DYN_LOG].value: "info" -> "debug"'
    ) in lines
    # an added Secret's YAML (Markdown) shows its keys only; flags keep their names
    assert f"  tls.key: '{REDACTED}'\n" in md
    assert f"  - '--hf-token'\n  - '{REDACTED}'\n  - '--api-key={REDACTED}'\n" in md


# ---------------------------------------------------------------------------- 5: Markdown
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


def visible_lines(md: str) -> list[str]:
    """The lines CommonMark renders as Markdown/HTML: outside fenced code blocks and HTML
    comments (a fence closes only with the same character, at least as long, alone on its
    line; a comment runs from ``<!--`` to ``-->``, whether it starts a block or not)."""
    out: list[str] = []
    fence: str | None = None
    in_comment = False
    for line in md.split("\n"):
        if fence is not None:
            stripped = line.strip(" ")
            if (
                len(line) - len(line.lstrip(" ")) <= 3
                and stripped
                and set(stripped) == {fence[0]}
                and len(stripped) >= len(fence)
            ):
                fence = None
            continue
        if in_comment:
            if "-->" in line:
                in_comment = False
            continue
        m = _FENCE_OPEN.fullmatch(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = m.group(1)
            continue
        if "<!--" in line:
            in_comment = "-->" not in line.split("<!--", 1)[1]
        out.append(line)
    return out


def test_markdown_hostile_value_cannot_hide_a_later_change() -> None:
    base = [
        _config_map("evil", {"a": "x"}),
        _deployment("registry/web:1.0", [{"name": "A", "value": "1"}]),
    ]
    head = [
        _config_map("evil", {"a": HOSTILE, HOSTILE: "key"}),
        # top-level field: its YAML block lines start at column 2 (can close ```)
        _config_map("evil-added", {"b": HOSTILE}, x=HOSTILE),
        _deployment(
            "registry/web:2.0",
            [{"name": "A\n```\n<!--", "value": "1"}, {"name": "A", "value": "1"}],
        ),
        # hostile identities: in the summary table, above every section
        {
            "apiVersion": "v1",
            "kind": "K|`<!--",
            "metadata": {"name": "n\n```", "namespace": "ns|</td>"},
        },
    ]
    md = report.markdown(_diff_result(base, head))
    shown = visible_lines(md)
    # the genuine image change is a visible table row of the Deployment's section ...
    rows = [ln for ln in shown if "registry/web:2.0" in ln]
    assert rows == [
        "| <code>spec.template.spec.containers&#91;name=main].image</code> | "
        '<code>"registry/web:1.0"</code> | <code>"registry/web:2.0"</code> |'
    ], md
    assert "<details><summary>~ Deployment demo/web</summary>" in shown
    # ... every <details> opened is closed by ours, nothing opens a comment, a heading or
    # a link outside code, and every row is one line
    assert sum(ln.count("<details>") for ln in shown) == 4
    assert sum(ln.count("</details>") for ln in shown) == 4
    # the summary table: one row per object, each with its five cells
    table = shown[shown.index("| | Kind | Namespace | Name | Fields |") + 2 :]
    table = table[: table.index("")]
    assert len(table) == 4 and all(row.count("|") == 6 for row in table), table
    assert not any("<!--" in ln or "[LGTM]" in ln for ln in shown), md
    assert [ln for ln in shown if ln.startswith("#")] == [shown[0]]
    assert md.count("\n```yaml\n") == 0 and "\n`````yaml\n" in md  # longer than ````
    _check_with_markdown_it(md)


def _check_with_markdown_it(md: str) -> None:
    """Cross-check with a real CommonMark parser when one is installed (not required)."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        return
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<!--" not in html and "<h1>" not in html and "<a " not in html
    assert html.count("<details>") == html.count("</details>") == 4
    assert (
        "<td><code>&quot;registry/web:1.0&quot;</code></td>\n"
        "<td><code>&quot;registry/web:2.0&quot;</code></td>"
    ) in html


def test_markdown_inline_code_cannot_be_closed() -> None:
    base = [_config_map("c", {"a": "1"})]
    d = _diff_result(base, [_config_map("c", {"a": "2"})])
    d.base = Side("`` `main` <!--", "a" * 40, 1)
    heading = report.markdown(d).splitlines()[0]
    # a fence longer than the longest backtick run inside
    assert heading == "### dyn-gitops diff ``` `` `main` <!-- ``` → `pr`", heading


# ---------------------------------------------------------------------------- 5: one line each
def test_problem_lines_escape_newlines_and_terminal_codes() -> None:
    p = Problem(
        f"a\nb{ESC}\udcff.yaml",
        3,
        "Kind/n\r\u202e",
        ("f\x00\U000e0001",),
        "bad\x9b31m\nforged: line",
    )
    shown = str(p)
    assert shown == (
        "a\\nb\\x1b[31m\\udcff.yaml:3: Kind/n\\r\\u202e: f\\x00\\U000e0001: "
        "bad\\x9b31m\\nforged: line"
    )
    assert shown.isprintable()


def test_hostile_names_cannot_forge_problem_lines(tmp_path: Path) -> None:
    name = f"evil\nforged.yaml:9: DynamoGraphDeployment/ok: all good{ESC}"
    (tmp_path / f"g\n{ESC}.yaml").write_text(dgd(json.dumps(name)))
    res = run_cli("validate", str(tmp_path))
    assert res.code == 1, res.stderr
    assert "\x1b" not in res.stderr and "\r" not in res.stderr
    lines = res.stderr.splitlines()
    assert all(ln.startswith(("g\\n\\x1b[31m.yaml:", "dyn-gitops: ")) for ln in lines), lines
    assert len(lines) == 2, lines  # the bad name, and the summary


def test_diff_text_output_is_one_visible_line_per_change() -> None:
    base = [_deployment("img:1", [{"name": "A", "value": "1"}])]
    head = [
        _deployment("img:2", [{"name": f"B\n+ Deployment demo/fake{ESC}", "value": "\u202e1\x85"}])
    ]
    text = report.text(_diff_result(base, head))
    assert "\x1b" not in text and "\u202e" not in text and "\x85" not in text
    lines = text.splitlines()
    assert [ln for ln in lines if ln.startswith("+ ")] == []
    assert (
        "    + spec.template.spec.containers[name=main].env[name=B\\n+ Deployment "
        'demo/fake\\x1b[31m]: {"name": "B\\n+ Deployment demo/fake\\u001b[31m", '
        '"value": "\\u202e1\\x85"}'
    ) in lines


def test_krm_result_messages_are_one_line(tmp_path: Path) -> None:
    item = yaml.safe_load(dgd(container="          bogus: 1\n"))
    item["spec"]["services"][f"Bad\n{ESC}"] = item["spec"]["services"].pop("Frontend")
    rl = {"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": [item]}
    res = run_cli("krm", stdin=yaml.safe_dump(rl))
    assert res.code == 1, res.stderr
    results = yaml.safe_load(res.stdout)["results"]
    assert results and all(
        printable(r["message"]) == r["message"]
        and printable(r["field"]["path"]) == r["field"]["path"]
        for r in results
    ), results
    assert "\x1b" not in res.stderr


# ---------------------------------------------------------------------------- 5: stdout
@pytest.fixture(scope="module")
def git_app(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    r = Repo(tmp_path_factory.mktemp("stdout") / "repo")
    shutil.copytree(TREE, r.path / "deploy")
    r.commit("base")
    r.git("tag", "base")
    agg = r.path / "deploy" / "agg.yaml"
    agg.write_text(agg.read_text().replace("replicas: 1", "replicas: 2", 1))
    r.commit("head")
    return r


SAMPLE = str(SAMPLES / "vllm-agg" / "input")
KRM_IN = yaml.safe_dump(
    {
        "apiVersion": "config.kubernetes.io/v1",
        "kind": "ResourceList",
        "items": [yaml.safe_load(dgd())],
    }
)
COMMANDS: dict[str, tuple[list[str], str | None, bool]] = {
    # name: (arguments, stdin, run in the git repository)
    "render": (["render", SAMPLE], None, False),
    "settings": (["settings", SAMPLE], None, False),
    "crds": (["crds"], None, False),
    "diff": (["diff", "--base", "base", "--head", "HEAD", "deploy"], None, True),
    "krm": (["krm"], KRM_IN, False),
    "post-render": (["post-render"], dgd(), False),
    "cmp generate": (["cmp", "generate", "--server", "off"], None, False),
    "cmp parameters": (["cmp", "parameters"], None, False),
    "hydrate": (["hydrate", "deploy"], None, True),
}


def _run_to(stdout: int, args: list[str], stdin: str | None, cwd: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DYN_GITOPS_", "ARGOCD_"))}
    env["TMPDIR"] = "/nonexistent"  # cmp generate: no warm server
    proc = subprocess.run(
        [sys.executable, "-c", "from dyn_gitops.oneshot import main; main()", *args],
        input=(stdin or "").encode(),
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    return proc.returncode, proc.stderr.decode()


@pytest.mark.parametrize("target", ["closed pipe", "full disk"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_failed_write_to_stdout_exits_2_with_a_message(
    command: str, target: str, git_app: Repo, tmp_path: Path
) -> None:
    args, stdin, in_repo = COMMANDS[command]
    cwd = git_app.path if in_repo else tmp_path
    if command == "cmp generate":
        shutil.copy(SAMPLES / "vllm-agg" / "input" / "vllm-agg.yaml", cwd)
    if target == "closed pipe":
        read, write = os.pipe()
        os.close(read)  # nobody reads: every write fails with EPIPE
        try:
            code, err = _run_to(write, args, stdin, cwd)
        finally:
            os.close(write)
        reason = "Broken pipe"
    else:
        with open("/dev/full", "wb") as full:
            code, err = _run_to(full.fileno(), args, stdin, cwd)
        reason = "No space left on device"
    assert code == 2, err
    assert err.splitlines()[-1] == (
        f"dyn-gitops: cannot write to stdout: {reason}; the output is incomplete"
    ), err
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_krm_problems_are_still_told_when_stdout_is_closed(tmp_path: Path) -> None:
    bad = yaml.safe_load(dgd(container="          bogus: 1\n"))
    rl = {"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": [bad]}
    read, write = os.pipe()
    os.close(read)
    try:
        code, err = _run_to(write, ["krm"], yaml.safe_dump(rl), tmp_path)
    finally:
        os.close(write)
    assert code == 2, err
    assert "mainContainer.bogus: unknown field 'bogus'" in err
    assert err.splitlines()[-1].startswith("dyn-gitops: cannot write to stdout: Broken pipe")


def test_argocd_parameters_of_the_wrong_shape_are_not_echoed() -> None:
    """A parameter given the wrong shape may still hold a credential (a NATS or etcd URL
    with a password): the problem names the parameter and the shape, never the value."""
    from dyn_gitops.argocd import cmpenv

    problems: list[str] = []
    raw = json.dumps(
        [
            {"name": "nats-address", "string": 31415926535},
            {"string": "nats://user:hunter2@nats:4222"},
        ]
    )
    assert cmpenv.parse_parameters(raw, problems) == {}
    assert problems == [
        "parameter nats-address: expected a string, found a number",
        "ARGOCD_APP_PARAMETERS[1]: expected an object with a name, found a mapping",
    ]
    assert not any("hunter2" in p or "31415926535" in p for p in problems)
