"""The PR preview action (``.github/actions/pr-preview``, issue 27 point 4): ``dyn-gitops diff``
on a pull request, posted as one comment that every later run updates.

Its script runs here as the action runs it: the real ``dyn-gitops`` CLI on real Git
repositories made in a temporary directory, and GitHub's REST API played by a fake served
over loopback HTTP (``support/fakegithub.py``: list with ``Link`` pagination, create,
update, queued failures). The action file is linted by the real actionlint, its scripts by
shellcheck. No cluster.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from support.binaries import missing_component
from support.docblocks import blocks, make_workspace
from support.fakegithub import FakeGitHub, fake_github
from support.paths import REPO

ACTION_DIR = REPO / ".github" / "actions" / "pr-preview"
SCRIPT = ACTION_DIR / "preview.py"
SAMPLE = REPO / "samples" / "ci" / "github-actions-preview.yaml"
GRAPH = (REPO / "samples" / "vllm-agg" / "input" / "vllm-agg.yaml").read_text(encoding="utf-8")
TOKEN = "ghs_fakeTokenValue0123456789abcdef"
PR = 7
MARKER = "<!-- dyn-gitops-preview -->"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pr_preview", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pr_preview"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


preview = _load()


@pytest.fixture(autouse=True)
def _no_retry_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preview, "RETRY_DELAYS", (0.0, 0.0))


# ---------------------------------------------------------------------------- set-up
def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return proc.stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str = "change") -> str:
    """Write (or with None delete) ``files`` and commit them; the new commit's id."""
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A GitOps repository: ``deploy/`` holds the vLLM sample (namespace demo), one commit."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    commit(root, {"deploy/dyn-gitops.yaml": "namespace: demo\n", "deploy/vllm.yaml": GRAPH}, "a")
    return root


class Action:
    """The action's preview step, run in-process: the script's ``main`` with the
    environment a GitHub runner gives it, the real CLI through a wrapper that records its
    environment (``cli_env``)."""

    def __init__(self, tmp: Path, repo: Path, fake: FakeGitHub | None, fork: bool = False):
        self.tmp, self.repo = tmp, repo
        self.bin = tmp / "bin"
        self.bin.mkdir(exist_ok=True)
        cli = self.bin / "dyn-gitops"
        cli.write_text(
            "#!/bin/sh\n"
            f'env > "{self.bin}/cli-env"\n'
            f'exec "{sys.executable}" -c "from dyn_gitops.oneshot import main; main()" "$@"\n'
        )
        cli.chmod(0o755)
        head_repo = "someone/r" if fork else "o/r"
        event = {"pull_request": {"number": PR, "head": {"repo": {"full_name": head_repo}},
                                  "base": {"repo": {"full_name": "o/r"}}}}  # fmt: skip
        (tmp / "event.json").write_text(json.dumps(event))
        keep = ("PATH", "HOME", "PYTHONPATH", "LANG", "SYSTEMROOT")
        self.env = {k: v for k, v in os.environ.items() if k in keep}
        self.env.update(
            GITHUB_API_URL=fake.url if fake else "http://127.0.0.1:9",
            GITHUB_REPOSITORY="o/r",
            GITHUB_SERVER_URL="https://github.test",
            GITHUB_RUN_ID="42",
            GITHUB_EVENT_PATH=str(tmp / "event.json"),
            GITHUB_STEP_SUMMARY=str(tmp / "summary.md"),
            GITHUB_OUTPUT=str(tmp / "output"),
            RUNNER_TEMP=str(tmp / "runner"),
            PREVIEW_TOKEN=TOKEN,
        )

    def argv(self, base: str, head: str = "HEAD", *extra: str) -> list[str]:
        return ["--base", base, "--head", head, "--workdir", str(self.repo),
                "--dyn-gitops", str(self.bin / "dyn-gitops"), *extra]  # fmt: skip

    def run(self, base: str, head: str = "HEAD", *extra: str) -> int:
        for name in ("summary.md", "output"):
            (self.tmp / name).unlink(missing_ok=True)
        return int(preview.main(self.argv(base, head, "--paths", "deploy", *extra), self.env))

    @property
    def summary(self) -> str:
        return (self.tmp / "summary.md").read_text(encoding="utf-8")

    @property
    def outputs(self) -> dict[str, str]:
        lines = (self.tmp / "output").read_text(encoding="utf-8").splitlines()
        return dict(line.split("=", 1) for line in lines)

    @property
    def report_dir(self) -> Path:
        return self.tmp / "runner" / "dyn-gitops-preview"

    @property
    def cli_env(self) -> str:
        return (self.bin / "cli-env").read_text(encoding="utf-8")


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with fake_github(TOKEN) as gh:
        yield gh


def ours(fake: FakeGitHub) -> list[dict[str, Any]]:
    return [c for c in fake.comments.get(PR, []) if c["body"].startswith(MARKER)]


# ---------------------------------------------------------------------------- posting
def test_first_run_creates_the_comment_and_later_runs_update_that_one(
    repo: Path, tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found again by its marker through every page of the pull request's comments (5
    others, 2 per page); a marker comment by someone else is left alone."""
    fake.page_size = 2
    for i in range(4):
        fake.add(PR, f"a review comment {i}")
    fake.add(PR, f"{MARKER}\nquoted by a reviewer", login="someone")
    base = _git(repo, "rev-parse", "HEAD")
    commit(repo, {"deploy/vllm.yaml": GRAPH.replace("replicas: 1", "replicas: 3", 1)})
    action = Action(tmp_path, repo, fake)

    assert action.run(base) == 0
    (mine,) = [c for c in ours(fake) if c["user"]["login"] == "github-actions[bot]"]
    assert "**Changes** to the rendered objects in 1 of 1 paths" in mine["body"]
    assert "vllm-agg-frontend" in mine["body"] and "spec.replicas" in mine["body"]
    assert action.outputs["status"] == "changes"
    assert action.outputs["comment-url"] == mine["html_url"]
    assert len(fake.calls("POST")) == 1 and fake.calls("PATCH") == []

    commit(repo, {"deploy/vllm.yaml": GRAPH.replace("vllm-runtime:1.1.0", "vllm-runtime:1.2.0")})
    assert action.run(base) == 0
    assert len(fake.calls("POST")) == 1, "a second comment was created"
    assert fake.calls("PATCH") == [f"/repos/o/r/issues/comments/{mine['id']}"]
    assert "vllm-runtime:1.2.0" in mine["body"] and "spec.replicas" not in mine["body"]
    assert len(fake.comments[PR]) == 6
    # the listing went through every page
    assert any("page=3" in p for p in fake.calls("GET"))

    assert action.run(base) == 0  # nothing changed: nothing written
    assert len(fake.calls("PATCH")) == 1 and len(fake.calls("POST")) == 1
    assert "Comment unchanged" in capsys.readouterr().out


def test_no_change_says_so(repo: Path, tmp_path: Path, fake: FakeGitHub) -> None:
    base = _git(repo, "rev-parse", "HEAD")
    commit(repo, {"README.md": "not a manifest of deploy/\n"})
    action = Action(tmp_path, repo, fake)
    assert action.run(base) == 0
    (comment,) = ours(fake)
    assert "✅ **No change** to the rendered objects (`deploy`)." in comment["body"]
    assert "**no differences**" in comment["body"]  # the CLI's own line
    assert action.outputs["status"] == "no-change"
    assert "No change" in action.summary


def test_a_head_that_does_not_render_is_shown_in_the_comment(
    repo: Path, tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """The problems (``file:line: Kind/name: field: what``) are the comment; the step then
    fails with one error line, no traceback. With fail-on-error false it passes."""
    base = _git(repo, "rev-parse", "HEAD")
    commit(repo, {"deploy/vllm.yaml": GRAPH.replace("replicas: 1", "replicas: -1", 1)})
    action = Action(tmp_path, repo, fake)
    assert action.run(base) == 1
    (comment,) = ours(fake)
    body = comment["body"]
    assert "❌ **Not compared**" in body and "### ❌ `deploy`: not compared" in body
    assert (
        "deploy/vllm.yaml:10: DynamoGraphDeployment/vllm-agg: spec.services.Frontend.replicas: "
        "must be >= 0, found -1"
    ) in body
    assert "HEAD does not render; nothing compared" in body
    assert action.outputs["status"] == "error"
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert err.strip().splitlines() == ["::error::dyn-gitops preview: not compared: deploy"]
    # the problems are in the log with workflow commands off around them
    assert out.count("::stop-commands::") == 1
    assert (action.report_dir / "01-deploy.errors.txt").read_text().count("must be >= 0") == 1

    assert action.run(base, "HEAD", "--fail-on-error", "false") == 0
    assert len(ours(fake)) == 1


def test_runner_settings_from_the_settings_file_reach_the_cli(
    repo: Path, tmp_path: Path, fake: FakeGitHub
) -> None:
    """``max-file-bytes: 100`` becomes the CLI's ``DYN_GITOPS_MAX_FILE_BYTES``: the graph is
    now too large to read, which the comment shows."""
    settings = tmp_path / "settings.yaml"
    settings.write_text("max-file-bytes: 100\n")
    base = _git(repo, "rev-parse", "HEAD")
    action = Action(tmp_path, repo, fake)
    assert action.run(base, "HEAD", "--settings-file", str(settings)) == 1
    assert "DYN_GITOPS_MAX_FILE_BYTES=100" in action.cli_env
    assert "max-file-bytes" in ours(fake)[0]["body"]


def test_a_bad_settings_file_is_one_line(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text("namespace: [a, b]\n")
    action = Action(tmp_path, repo, None)
    assert action.run("HEAD", "HEAD", "--settings-file", str(settings)) == 2
    assert capsys.readouterr().err == (
        f"::error::dyn-gitops preview: settings file {settings}: namespace: expected a string "
        "or a number\n"
    )


def test_secret_values_and_the_token_are_never_shown(
    repo: Path, tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hf\n  namespace: demo\n"
        "stringData:\n  HF_TOKEN: {}\n"
    )
    commit(repo, {"deploy/secret.yaml": secret.format("hf_before_0123456789")})
    base = _git(repo, "rev-parse", "HEAD")
    commit(repo, {"deploy/secret.yaml": secret.format("hf_after_9876543210")})
    action = Action(tmp_path, repo, fake)
    assert action.run(base) == 0
    out, err = capsys.readouterr()
    report = "".join(p.read_text() for p in action.report_dir.iterdir())
    shown = "\n".join([ours(fake)[0]["body"], action.summary, report, out, err])
    assert "<code>stringData.HF&#95;TOKEN</code> | <code>(redacted)</code>" in shown  # the key
    for value in ("hf_before_0123456789", "hf_after_9876543210", TOKEN):
        assert value not in shown
    assert TOKEN not in action.cli_env  # dyn-gitops never gets the token


# ---------------------------------------------------------------------------- size
def _graphs(prefix: str, n: int) -> dict[str, str]:
    return {
        f"{prefix}/g{i}.yaml": GRAPH.replace("name: vllm-agg", f"name: {prefix}-g{i}")
        for i in range(n)
    }


def test_an_oversized_diff_is_cut_and_the_full_one_is_in_the_report(
    repo: Path, tmp_path: Path, fake: FakeGitHub
) -> None:
    """Two paths whose diffs are each near the CLI's own limit: together over GitHub's
    65,536 characters. The comment keeps the first whole and the second's summary, says it
    is cut; the job summary has both whole, the report directory each full text diff."""
    base = _git(repo, "rev-parse", "HEAD")
    commit(repo, {**_graphs("apps-a", 3), **_graphs("apps-b", 3)}, "six graphs")
    action = Action(tmp_path, repo, fake)
    argv = action.argv(base, "HEAD", "--paths", "apps-a apps-b")
    assert preview.main(argv, action.env) == 0
    body = ours(fake)[0]["body"]
    assert len(body.encode()) <= 65_536
    assert "This comment is cut to stay under GitHub's size limit" in body
    assert "[this run](https://github.test/o/r/actions/runs/42)" in body
    assert "Rendered `apps-b`" in body and "_The details are left out here" in body
    summary = action.summary
    assert "Rendered `apps-a`" in summary and "Rendered `apps-b`" in summary
    assert len(summary) > 65_536 and "is cut" not in summary
    for i, path in enumerate(("apps-a", "apps-b"), 1):
        text = (action.report_dir / f"0{i}-{path}.diff.txt").read_text()
        assert all(f"DynamoGraphDeployment default/{path}-g{n}" in text for n in range(3))


def _diff(path: str, code: int, markdown: str = "", errors: str = "") -> Any:
    return preview.PathDiff(path, code, markdown=markdown, errors=errors)


def test_fit_cuts_by_whole_sections_within_the_limit() -> None:
    """Each section whole, else its summary, else left out and counted; never over."""
    big = "### dyn-gitops diff `a` → `b`\n\nRendered `x`: **1 changed**.\n\n" + "| row |\n" * 5000
    errors = "\n".join(f"f.yaml:{i}: problem {i}" for i in range(5000))
    diffs = [_diff("x", 1, big), _diff("y", 2, errors=errors), _diff("z", 1, big)]
    cfg = preview.config(preview.parse_args(["--base", "b"]), {})
    body = preview.compose(cfg, diffs)
    assert len(body.encode()) <= preview.COMMENT_LIMIT
    assert body.startswith(MARKER + "\n")
    assert "| row |" in body  # the first whole
    assert "f.yaml:19: problem 19" in body and "f.yaml:20:" not in body
    assert "_4980 more lines are left out here._" in body
    assert body.count("_The details are left out here") == 1  # the third: its summary
    assert "This comment is cut" in body
    tiny = preview.fit("head", [preview.section(d) for d in diffs], "tail", "note", 250)
    assert tiny.endswith("_3 more paths are left out here._\n\nnote\n\ntail")


def test_nothing_from_the_input_can_close_the_code_block() -> None:
    lines = ["````", "```text", "<details>", "\x1b[31mred"]
    section = preview.section(_diff("dep`loy", 2, errors="\n".join(lines)))
    assert section.full.startswith("### ❌ ``dep`loy``: not compared\n\n`````text\n")
    assert section.full.endswith("\n`````") and "\\x1b[31mred" in section.full


# ---------------------------------------------------------------------------- API errors
def _stub_cli(tmp: Path) -> Path:
    """A ``dyn-gitops`` that answers every diff "equal" at once (for the API's tests)."""
    stub = tmp / "stub-dyn-gitops"
    stub.write_text(
        "#!/bin/sh\nprintf '### dyn-gitops diff\\n\\nRendered: **no differences**\\n'\n"
    )
    stub.chmod(0o755)
    return stub


def _run_script(action: Action, *extra: str) -> subprocess.CompletedProcess[str]:
    """The script as the action runs it: a process of its own."""
    argv = [*action.argv("HEAD"), "--dyn-gitops", str(_stub_cli(action.tmp)), *extra]
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        env=action.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_an_api_error_is_one_line_and_a_failed_step(
    repo: Path, tmp_path: Path, fake: FakeGitHub
) -> None:
    fake.fail("POST", 422, "Validation Failed")
    proc = _run_script(Action(tmp_path, repo, fake))
    assert proc.returncode == 2
    assert proc.stderr == (
        "::error::dyn-gitops preview: GitHub API: POST /repos/o/r/issues/7/comments answered "
        "422: Validation Failed\n"
    )
    assert TOKEN not in proc.stdout + proc.stderr
    assert (tmp_path / "summary.md").read_text().count("could not be posted") == 1


def test_a_read_only_token_on_our_own_pull_request_names_the_permission(
    repo: Path, tmp_path: Path, fake: FakeGitHub
) -> None:
    fake.fail("POST", 403, "Resource not accessible by integration")
    proc = _run_script(Action(tmp_path, repo, fake))
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(
        "answered 403: Resource not accessible by integration "
        "(the token needs `pull-requests: write`)"
    )
    assert len(proc.stderr.splitlines()) == 1


def test_an_unreachable_api_is_one_line(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    action = Action(tmp_path, repo, None)  # GITHUB_API_URL: a closed loopback port
    argv = [*action.argv("HEAD"), "--dyn-gitops", str(_stub_cli(tmp_path))]
    assert preview.main(argv, action.env) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "::error::dyn-gitops preview: cannot reach the GitHub API at http://127.0.0.1:9: "
    )


def test_a_refused_token_and_a_missing_base_are_one_line_each(
    repo: Path, tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    action = Action(tmp_path, repo, fake)
    action.env["PREVIEW_TOKEN"] = "ghs_notTheRightOne"
    argv = [*action.argv("HEAD"), "--dyn-gitops", str(_stub_cli(tmp_path))]
    assert preview.main(argv, action.env) == 2
    assert capsys.readouterr().err == (
        "::error::dyn-gitops preview: GitHub API: GET /repos/o/r/issues/7/comments answered "
        "401: Bad credentials (the token is refused)\n"
    )
    assert preview.main(["--base", "", *argv[2:]], action.env) == 2
    assert capsys.readouterr().err == (
        "::error::dyn-gitops preview: no base revision: give `base` (outside a pull_request "
        "event)\n"
    )


def test_server_errors_are_retried_and_a_post_is_not(
    repo: Path, tmp_path: Path, fake: FakeGitHub
) -> None:
    fake.fail("GET", 502, "Bad Gateway", times=2)
    action = Action(tmp_path, repo, fake)
    argv = [*action.argv("HEAD"), "--dyn-gitops", str(_stub_cli(tmp_path))]
    assert preview.main(argv, action.env) == 0
    assert len(fake.calls("GET")) == 3 and len(ours(fake)) == 1
    fake.fail("GET", 502, "Bad Gateway", times=3)  # one more than the retries
    assert preview.main(argv, action.env) == 2
    fake.comments.clear()
    fake.fail("POST", 502, "Bad Gateway")
    assert preview.main(argv, action.env) == 2
    assert len(fake.calls("POST")) == 2  # the failed one was not sent again


def test_a_next_page_elsewhere_is_not_followed(
    repo: Path, tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """The token goes to the API and nowhere else, whatever a Link header says."""
    fake.page_size, fake.link_base = 1, "http://elsewhere.test"
    fake.add(PR, "one")
    fake.add(PR, "two")
    action = Action(tmp_path, repo, fake)
    argv = [*action.argv("HEAD"), "--dyn-gitops", str(_stub_cli(tmp_path))]
    assert preview.main(argv, action.env) == 2
    assert "a next page outside http://127.0.0.1" in capsys.readouterr().err
    assert fake.calls("POST") == []


def test_a_fork_without_a_write_token_gets_the_job_summary_only(
    repo: Path, tmp_path: Path, fake: FakeGitHub
) -> None:
    """A fork's pull_request token is read-only: the create answers 403. The preview is in
    the job summary, with a warning, and the step passes."""
    fake.fail("POST", 403, "Resource not accessible by integration")
    base = _git(repo, "rev-parse", "HEAD")
    commit(repo, {"deploy/vllm.yaml": GRAPH.replace("replicas: 1", "replicas: 3", 1)})
    action = Action(tmp_path, repo, fake, fork=True)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *action.argv(base), "--paths", "deploy"],
        env=action.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert ours(fake) == []
    assert "comes from a fork, whose token may not comment (403)" in action.summary
    assert "vllm-agg-frontend" in action.summary
    assert "::warning::dyn-gitops preview: This pull request comes from a fork" in proc.stdout
    assert action.outputs["comment-url"] == ""
    assert (action.report_dir / "comment.md").read_text().startswith(MARKER)


def test_without_a_token_nothing_is_posted(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry run: the comment it would post is in the report directory."""
    action = Action(tmp_path, repo, None)
    del action.env["PREVIEW_TOKEN"]
    argv = [*action.argv("HEAD"), "--dyn-gitops", str(_stub_cli(tmp_path))]
    assert preview.main(argv, action.env) == 0
    assert "No token" in action.summary
    assert (action.report_dir / "comment.md").read_text().startswith(MARKER)


# ---------------------------------------------------------------------------- the files
def _action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ACTION_DIR / "action.yml").read_text())
    return loaded


def test_the_action_passes_every_input_through_the_environment() -> None:
    """No ``${{ }}`` inside a ``run:`` script (an input would be code there), and every
    input reaches a step."""
    action = _action()
    steps = action["runs"]["steps"]
    assert all("${{" not in s.get("run", "") for s in steps)
    used = json.dumps(steps)
    assert [i for i in action["inputs"] if f"inputs.{i}" not in used] == []
    run = next(s for s in steps if s.get("id") == "preview")["run"]
    for flag in ("--paths", "--base", "--head", "--settings-file", "--comment-author",
                 "--fail-on-error", "--artifact-name", "--dyn-gitops", "--report-dir"):  # fmt: skip
        assert flag in run, flag
    assert preview.parse_args(["--base", "b", "--paths", "a b"]).paths == "a b"


def _lint_tree(tmp: Path, workflow: str) -> Path:
    """A repository holding the action and ``workflow``, which uses it as a local action,
    so that actionlint checks its inputs against action.yml."""
    shutil.copytree(ACTION_DIR, tmp / ".github" / "actions" / "pr-preview")
    (tmp / ".github" / "workflows").mkdir(parents=True)
    local = workflow.replace(
        "dyn-gitops/dyn-gitops/.github/actions/pr-preview@0.1.0", "./.github/actions/pr-preview"
    )
    assert local != workflow
    (tmp / ".github" / "workflows" / "preview.yaml").write_text(local)
    _git(tmp, "init", "-q")  # actionlint finds the project (and its local actions) by .git
    return tmp


def _actionlint(test_binaries: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    actionlint = test_binaries("actionlint")["actionlint"]
    return subprocess.run(
        [str(actionlint), "-no-color", ".github/workflows/preview.yaml"],
        capture_output=True, text=True, cwd=cwd, timeout=120,
    )  # fmt: skip


def test_the_sample_and_the_action_pass_actionlint(test_binaries: Any, tmp_path: Path) -> None:
    proc = _actionlint(test_binaries, _lint_tree(tmp_path, SAMPLE.read_text()))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_finds_a_wrong_input_of_the_action(test_binaries: Any, tmp_path: Path) -> None:
    bad = SAMPLE.read_text().replace("paths: deploy", "path: deploy")
    proc = _actionlint(test_binaries, _lint_tree(tmp_path, bad))
    assert proc.returncode == 1 and '"path" is not defined' in proc.stdout, proc.stdout


def test_the_action_scripts_pass_shellcheck(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        missing_component("shellcheck is not installed: run tools/images/deps.sh as root")
    scripts = []
    for n, step in enumerate(s for s in _action()["runs"]["steps"] if "run" in s):
        path = tmp_path / f"step{n}.sh"
        path.write_text("#!/usr/bin/env bash\n" + step["run"])
        scripts.append(str(path))
    proc = subprocess.run([shellcheck, *scripts], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_script_is_typed_strictly() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(SCRIPT)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_docs_dry_run_runs_as_written(tmp_path: Path) -> None:
    """docs/workflows.md's block, in a reader's repository (``make_workspace``: ``deploy/``,
    tags ``v1`` and ``v2``) with the action's directory beside it: no token, nothing
    posted, the comment written to the report directory."""
    name = "tests/test_pr_preview.py::test_the_docs_dry_run_runs_as_written"
    (block,) = [b for b in blocks(REPO) if b.kind == "by" and b.arg == name]
    ws = make_workspace(REPO, tmp_path)
    (ws / ".github").symlink_to(REPO / ".github")
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "HOME": str(tmp_path),
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.body],
        cwd=ws, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    comment = (ws / "preview" / "comment.md").read_text(encoding="utf-8")
    assert "**Changes** to the rendered objects in 1 of 1 paths (`deploy`)" in comment
    assert "No token" in proc.stdout
