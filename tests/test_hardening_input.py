"""Hostile input never crashes the renderer (issue 11, point 2 and the reading limits of 3).

Every case goes through a real entry point (render/validate, krm, post-render, cmp
generate) and must end with exit 1 (2 for a bad Argo CD environment, as any other bad
setting), every problem as ``file:line: ...``, nothing on stdout and no traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliResult, run_cli
from support.paths import SAMPLES

DGD = SAMPLES / "vllm-agg" / "input" / "vllm-agg.yaml"
PROBLEM_LINE = re.compile(r"^[^:\n]+:\d+: .+")


def refused(res: CliResult, *expected: str, code: int = 1) -> None:
    assert res.code == code, res.stderr
    assert res.stdout == ""
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    for text in expected:
        assert text in res.stderr, res.stderr


def problem_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("dyn-gitops:")]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def dgd() -> dict[str, Any]:
    return yaml.safe_load(DGD.read_text())  # type: ignore[no-any-return]


# libyaml scans deep flow collections in quadratic time: 20,000 levels keep each run short;
# block nesting crashes libyaml's own composer (segmentation fault) at this size
DEEP_FLOW = "x: " + "[" * 20_000 + "]" * 20_000 + "\n"
DEEP_SEQ = "- " * 60_000 + "x\n"
DEEP_BLOCK = "".join(" " * i + "k:\n" for i in range(3_000)) + " " * 3_000 + "v\n"


# ---------------------------------------------------------------------------- nesting depth
@pytest.mark.parametrize(
    "text",
    [DEEP_FLOW, DEEP_BLOCK, DEEP_SEQ, "[" * 20_000 + "\n"],
    ids=["flow", "block", "seq", "open"],
)
def test_deep_nesting_is_refused_before_parsing_recurses(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "deep.yaml", text)
    res = run_cli("validate", str(path))
    refused(res, "deep.yaml:")
    assert all(PROBLEM_LINE.match(line) for line in problem_lines(res.stderr))


def test_a_file_of_open_brackets_is_refused_at_the_depth_limit(tmp_path: Path) -> None:
    """The depth problem stops the file: skipping the rest of the document instead would make
    libyaml scan all of it (its scanner slows down with every open flow bracket), so a file
    of open brackets up to max-file-bytes would hold the renderer for minutes."""
    path = write(tmp_path, "open.yaml", "x: " + "[" * 4_000_000 + "\n")
    res = run_cli("validate", str(path))
    refused(res, "open.yaml:1: YAML nested more than 100 levels deep (setting max-depth)")
    assert "open.yaml:1: the rest of this file is not read" in res.stderr
    assert "malformed YAML" not in res.stderr


def test_max_depth_setting_bounds_nesting(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
        "data:\n  a: b\nx: " + "[" * 20 + "]" * 20 + "\n",
    )
    refused(
        run_cli("validate", "--max-depth", "10", str(path)),
        "cm.yaml:7: YAML nested more than 10 levels deep (setting max-depth)",
    )
    assert run_cli("validate", str(path)).code == 0  # the default (100) allows it
    deeper = write(tmp_path, "deeper.yaml", "x: " + "[" * 300 + "]" * 300 + "\n")
    refused(
        run_cli("validate", "--max-depth", "200", str(deeper)),
        "deeper.yaml:1: YAML nested more than 200 levels deep",
    )
    # no runner can go past what the code that builds and writes the data can nest
    refused(
        run_cli("validate", "--max-depth", "100000", str(deeper)),
        "max-depth: found 100000, expected a limit from 1 to 200",
        code=2,
    )


def test_deep_nesting_through_aliases_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 " + "[" * 60 + "]" * 60]
    lines += [f"a{i}: &a{i} " + "[" * 60 + f"*a{i - 1}" + "]" * 60 for i in range(1, 30)]
    path = write(tmp_path, "alias.yaml", "\n".join(lines) + "\n")
    refused(run_cli("validate", str(path)), "nested more than 100 levels deep")


def test_deep_nesting_in_krm_post_render_and_settings_file(tmp_path: Path) -> None:
    rl = (
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n"
        "functionConfig:\n" + DEEP_SEQ
    )
    refused(run_cli("krm", stdin=rl), "nested more than")
    refused(run_cli("post-render", stdin=DEEP_SEQ), "nested more than")
    helm = (
        "---\n# Source: c/templates/x.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        "  name: a\n  annotations:\n    postrenderer.helm.sh/postrender-filename: "
        + "[" * 20_000
        + "\n"
    )
    refused(run_cli("post-render", stdin=helm))
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(DGD, app)
    (app / "dyn-gitops.yaml").write_text("[" * 20_000 + "]" * 20_000 + "\n")  # < 64 KiB
    refused(run_cli("render", str(app)), "dyn-gitops.yaml:1: YAML nested more than")


def test_deep_json_in_argocd_parameters_and_legacy_config(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(DGD, app)
    deep = "[" * 30_000 + "]" * 30_000  # (one variable may hold at most 128 KiB)
    res = run_cli(
        "cmp",
        "generate",
        "--server",
        "off",
        cwd=app,
        env={"TMPDIR": "/nonexistent", "ARGOCD_APP_PARAMETERS": deep},
    )
    refused(res, "ARGOCD_APP_PARAMETERS: not valid JSON (nested more than", code=2)
    obj = dgd()
    service = next(iter(obj["spec"]["services"].values()))
    service.setdefault("envs", []).append(
        {"name": "DYN_DEPLOYMENT_CONFIG", "value": "[" * 30_000 + "]" * 30_000}
    )
    path = write(tmp_path, "legacy.yaml", yaml.safe_dump(obj))
    refused(run_cli("validate", str(path)), "DYN_DEPLOYMENT_CONFIG is not valid JSON")


# ---------------------------------------------------------------------------- alias budgets
BOMB = "a: &a [" + ",".join(["x"] * 60) + "]\nb: [" + ",".join(["*a"] * 60) + "]\n"


def test_many_small_alias_bombs_add_up(tmp_path: Path) -> None:
    # each document expands to ~3,700 nodes: far below max-yaml-nodes, but 20 of them are not
    for i in range(20):
        write(tmp_path, f"bomb{i:02}.yaml", BOMB)
    res = run_cli("validate", "--max-total-yaml-nodes", "50000", str(tmp_path))
    refused(res, "through aliases (setting max-total-yaml-nodes)")
    res = run_cli("validate", str(tmp_path / "bomb00.yaml"), "--max-yaml-nodes", "1000")
    refused(res, "bomb00.yaml:1: document expands to more than 1000 YAML nodes")


def test_duplicate_keys_are_still_found(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.yaml", "apiVersion: v1\nkind: ConfigMap\napiVersion: v1\n")
    refused(run_cli("validate", str(path)), "dup.yaml:3: duplicate key 'apiVersion'")


# ---------------------------------------------------------------------------- values
def test_values_json_cannot_carry_are_problems_with_their_place(tmp_path: Path) -> None:
    head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{}\ndata:\n"
    docs = [
        head.format(0) + "  a: !!int abc\n",
        head.format(1) + "  a: !!float x\n",
        head.format(2) + "  a: !foo x\n",
        head.format(3) + "  a: !!binary aGVsbG8=\n",
        head.format(4) + "  a: !!set {x, y}\n",
        head.format(5) + "  a: .nan\n",
        head.format(6) + "  1: x\n",
        head.format(7) + "  a: " + "9" * 5_000 + "\n",
        head.format(8) + "  a: !!timestamp 2001-12-14\n",
        head.format(9) + "  a: !!int \n",
    ]  # empty: PyYAML's constructor raises IndexError
    path = write(tmp_path, "values.yaml", "---\n".join(docs))
    res = run_cli("validate", str(path))
    refused(
        res,
        "values.yaml:6: value tagged !!int cannot be read",
        "values.yaml:13: value tagged !!float cannot be read",
        "values.yaml:20: unknown YAML tag '!foo'",
        "values.yaml:27: data.a: binary data (!!binary) is not a JSON value",
        "values.yaml:34: data.a: a set (!!set) is not a JSON value",
        "values.yaml:41: data.a: NaN and infinity are not numbers",
        "values.yaml:47: data: mapping key 1 is a number, not a string",
        "values.yaml:55: value tagged !!int cannot be read (too many digits)",
        "values.yaml:62: data.a: a date is not a JSON value",
        "values.yaml:69: value tagged !!int cannot be read",
    )
    assert "9999" not in res.stderr  # values are not echoed
    assert all(PROBLEM_LINE.match(line) for line in problem_lines(res.stderr))


def test_objects_are_shaped_before_anything_reads_them(tmp_path: Path) -> None:
    docs = [
        "apiVersion: v1\nkind: ConfigMap\nmetadata: just-a-string\n",
        "apiVersion: v1\nkind: [ConfigMap]\nmetadata:\n  name: b\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: [x]\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  annotations:\n    a: 1\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e\ndata:\n"
        "  a: !!timestamp not-a-date\n",
    ]
    path = write(tmp_path, "shapes.yaml", "---\n".join(docs))
    res = run_cli("validate", str(path))
    refused(
        res,
        "shapes.yaml:3: ConfigMap/?: metadata: expected a mapping",
        "shapes.yaml:6: ?/b: kind: expected a string",
        "shapes.yaml:14: ConfigMap/c: metadata.labels: expected a mapping",
        "shapes.yaml:21: ConfigMap/d: metadata.annotations.a: expected a string",
        "shapes.yaml:28: value tagged !!timestamp cannot be read",
    )


# ---------------------------------------------------------------------------- pod spec shapes
def test_wrong_types_in_a_pod_spec_are_reported_with_their_field_path(tmp_path: Path) -> None:
    obj = dgd()
    name, service = next(iter(obj["spec"]["services"].items()))
    extra = service.setdefault("extraPodSpec", {})
    extra["volumes"] = [{"emptyDir": {}}]
    extra["containers"] = [{"image": "sidecar"}]
    main = extra.setdefault("mainContainer", {})
    main["volumeMounts"] = [{"mountPath": "/x"}]
    main["resources"] = {"limits": ["1"], "requests": {"cpu": True}}
    main["livenessProbe"] = {"httpGet": "/healthz", "periodSeconds": "often"}
    main["env"] = ["A=1"]
    path = write(tmp_path, "graph.yaml", yaml.safe_dump(obj, sort_keys=False))
    res = run_cli("validate", str(path))
    at = f"DynamoGraphDeployment/{obj['metadata']['name']}: spec.services.{name}.extraPodSpec"
    refused(
        res,
        f"{at}.volumes[0]: needs a name",
        f"{at}.containers[0]: a container needs a name",
        f"{at}.mainContainer.volumeMounts[0]: needs a name",
        f"{at}.mainContainer.resources.limits:",
        f"{at}.mainContainer.resources.requests.cpu: expected a Kubernetes quantity",
        f"{at}.mainContainer.livenessProbe.httpGet:",
        f"{at}.mainContainer.livenessProbe.periodSeconds: expected a whole number",
        f"{at}.mainContainer.env[0]:",
    )
    assert all(PROBLEM_LINE.match(line) for line in problem_lines(res.stderr))


def test_non_list_containers_and_v1beta1_resources(tmp_path: Path) -> None:
    obj = dgd()
    name, service = next(iter(obj["spec"]["services"].items()))
    service.setdefault("extraPodSpec", {})["containers"] = {"name": "x"}
    path = write(tmp_path, "graph.yaml", yaml.safe_dump(obj, sort_keys=False))
    refused(run_cli("validate", str(path)), f"spec.services.{name}.extraPodSpec.containers:")
    text = (SAMPLES / "v1beta1-pair" / "input" / "sglang-disagg.yaml").read_text()
    doc = next(d for d in yaml.safe_load_all(text) if d and d["apiVersion"].endswith("v1beta1"))
    spec = doc["spec"]["components"][1]["podTemplate"]["spec"]
    spec["containers"][0]["resources"] = {"requests": ["x"]}
    path = write(tmp_path, "beta.yaml", yaml.safe_dump(doc, sort_keys=False))
    refused(
        run_cli("validate", str(path)),
        "spec.components[1].podTemplate.spec.containers[0].resources.requests:",
    )


# ---------------------------------------------------------------------------- file system
def test_links_fifos_and_special_files_are_problems(tmp_path: Path) -> None:
    shutil.copy(DGD, tmp_path)
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    (tmp_path / "dangling.yaml").symlink_to("nowhere.yaml")
    os.mkfifo(tmp_path / "fifo.yaml")  # never written to: reading it must not block
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "back").symlink_to("..")  # a directory loop: walked once
    res = run_cli("validate", str(tmp_path))
    refused(
        res,
        "loop.yaml:1: cannot read the file (a symlink loop)",
        "dangling.yaml:1: cannot read the file (a dangling symlink)",
        "fifo.yaml:1: not a regular file",
    )
    assert len(problem_lines(res.stderr)) == 3
    refused(run_cli("validate", str(tmp_path / "fifo.yaml")), "not a regular file")


def test_settings_file_gets_the_checks_of_a_manifest(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text("namespace: elsewhere\n")
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(DGD, app)
    (app / "dyn-gitops.yaml").symlink_to(outside)
    refused(run_cli("render", str(app)), "dyn-gitops.yaml:1: symlink leads outside")
    (app / "dyn-gitops.yaml").unlink()
    os.mkfifo(app / "dyn-gitops.yaml")
    refused(run_cli("render", str(app)), "dyn-gitops.yaml:1: not a regular file")
    (app / "dyn-gitops.yaml").unlink()
    (app / "dyn-gitops.yaml").write_text("# padding\n" * 10_000)
    refused(
        run_cli("render", str(app)),
        "dyn-gitops.yaml:1: file is 100000 bytes, over the limit of 65536",
    )


UNPRIVILEGED = """
import os, sys
os.setgroups([]); os.setgid(65534); os.setuid(65534)
from dyn_gitops.oneshot import main
sys.argv = ["dyn-gitops", *sys.argv[1:]]
main()
"""


def run_unprivileged(*args: str) -> CliResult:
    """The real entry point, as a user that file modes apply to (root reads anything)."""
    import subprocess

    if os.geteuid() != 0:
        return run_cli(*args)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    # the interpreter and the sources may sit where nobody cannot read: load them first
    code = (
        "import encodings.utf_8_sig, dyn_gitops.cli, dyn_gitops.pipeline, dyn_gitops.read, "
        "dyn_gitops.parse, dyn_gitops.emit, dyn_gitops.context, dyn_gitops.oneshot\n" + UNPRIVILEGED
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def test_unreadable_files_and_directories_are_errors() -> None:
    # not under pytest's tmp_path: its parent is private to the user running the tests
    with tempfile.TemporaryDirectory() as tmp:
        _check_unreadable(Path(tmp))


def _check_unreadable(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "locked").mkdir(parents=True)
    (root / "noexec").mkdir()
    shutil.copy(DGD, root)
    (root / "locked" / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    (root / "noexec" / "b.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    (root / "secret.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    for p in (tmp_path, root):
        p.chmod(0o755)
    (root / "vllm-agg.yaml").chmod(0o644)
    (root / "locked").chmod(0o000)
    (root / "noexec").chmod(0o644)  # listable, but its entries cannot be opened
    (root / "secret.yaml").chmod(0o000)
    try:
        res = run_unprivileged("validate", str(root))
    finally:
        for p in (root / "locked", root / "noexec"):
            p.chmod(0o755)
    refused(
        res,
        "locked:1: cannot read the directory (permission denied)",
        "noexec/b.yaml:1: cannot read the file (permission denied)",
        "secret.yaml:1: cannot read the file (permission denied)",
    )


def test_parameters_json_is_checked(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(DGD, app)
    big = json.dumps([{"name": "namespace", "string": "x"}])[:-1] + "," + "9" * 5000 + "]"
    res = run_cli(
        "cmp",
        "generate",
        "--server",
        "off",
        cwd=app,
        env={"TMPDIR": "/nonexistent", "ARGOCD_APP_PARAMETERS": big},
    )
    refused(res, "ARGOCD_APP_PARAMETERS: not valid JSON", code=2)
