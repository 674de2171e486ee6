#!/usr/bin/env python3
"""The dyn-gitops PR preview: what the ``pr-preview`` action runs on a pull request.

It runs ``dyn-gitops diff`` on each path between the base and the head revision and posts
the result as ONE comment on the pull request, found again on every later run by its hidden
marker (:data:`MARKER`) and updated in place, never a second one.

- A comment over GitHub's size limit is cut by whole sections (never inside a table or a
  code block) and says so; the full report goes to the job summary and to the report
  directory (the action uploads it as an artifact, with the full text diff of each path).
- A revision that does not render is shown in the comment (its problems, one per line, as
  ``dyn-gitops diff`` prints them: never a secret's value), then the step fails
  (``--fail-on-error``); the job does not crash.
- A pull request from a fork, whose token may not comment, gets the job summary only.
- An error of the GitHub API or of the set-up is one line on stderr, exit 2.

The HTTP calls use the standard library only; the token is sent to the API URL the runner
names and nowhere else (no redirect, no pagination link to another origin) and is not passed
to ``dyn-gitops``.

Exit codes: 0 posted (or written to the job summary only), 1 posted but a path was not
compared (``--fail-on-error``), 2 an error (usage, set-up, the GitHub API), 3 a bug.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: the first line of the one comment this action owns on a pull request
MARKER = "<!-- dyn-gitops-preview -->"
#: GitHub refuses a comment body over 65,536 characters; measured here in UTF-8 bytes, which
#: are never fewer than characters (or UTF-16 units), so the limit holds however GitHub counts
COMMENT_LIMIT = 65_536
#: a step's job summary may hold 1 MiB; what is over it is dropped by the runner
SUMMARY_LIMIT = 1_000_000
#: the comments of a pull request are read 100 at a time, at most this many pages
PER_PAGE = 100
MAX_PAGES = 100
#: the largest API response read (a page of 100 comments of 64 KiB each, with room)
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: seconds to wait before each retry of a GET or a PATCH (a POST is never retried: a lost
#: answer to one that succeeded would make a second comment)
RETRY_DELAYS: tuple[float, ...] = (2.0, 5.0)
RETRY_STATUS = frozenset({500, 502, 503, 504})
HTTP_TIMEOUT = 30.0
#: the settings file holds runner settings, given to the CLI as its environment
SETTINGS_PREFIX = "DYN_GITOPS_"
SETTINGS_FILE_MAX_BYTES = 64 * 1024
_SETTING_NAME = re.compile(r"[a-z][a-z0-9-]*")
#: variables that may hold a token: never passed to ``dyn-gitops``
TOKEN_ENV = ("PREVIEW_TOKEN", "GITHUB_TOKEN", "GH_TOKEN")
#: the CLI's exit codes of a comparison (0 equal, 1 different); anything else: not compared
COMPARED = (0, 1)
#: lines of problems kept for a path when its whole list does not fit
SHORT_LINES = 20


class PreviewError(Exception):
    """A deliberate error: one line on stderr, exit 2."""


class ApiError(PreviewError):
    def __init__(self, status: int, method: str, route: str, message: str) -> None:
        self.status = status
        hint = ""
        if status == 401:
            hint = " (the token is refused)"
        elif status == 403 and "rate limit" not in message.lower():
            hint = " (the token needs `pull-requests: write`)"
        super().__init__(f"GitHub API: {method} {route} answered {status}: {message}{hint}")


# ----------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Config:
    paths: tuple[str, ...]
    base: str
    head: str
    dyn_gitops: str
    workdir: str
    settings: Mapping[str, str]
    fail_on_error: bool
    comment_author: str
    report_dir: Path
    artifact_name: str
    token: str = field(repr=False)
    api_url: str
    repository: str
    pr: int | None
    fork: bool
    run_url: str
    environ: Mapping[str, str] = field(repr=False)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--paths", default=".", help="paths to compare, separated by blanks")
    p.add_argument("--base", required=True, metavar="REV", help="the revision to compare from")
    p.add_argument("--head", default="HEAD", metavar="REV", help="the revision to compare to")
    p.add_argument("--settings-file", default="", help="YAML of runner settings (name: value)")
    p.add_argument("--fail-on-error", default="true", choices=("true", "false"))
    p.add_argument("--comment-author", default="github-actions[bot]", metavar="LOGIN")
    p.add_argument("--pr", type=int, default=None, help="default: the event's pull request")
    p.add_argument("--dyn-gitops", default="dyn-gitops", metavar="PROGRAM")
    p.add_argument("--report-dir", default="", help="default: $RUNNER_TEMP/dyn-gitops-preview")
    p.add_argument("--artifact-name", default="dyn-gitops-preview")
    p.add_argument("--workdir", default=".", help="the Git repository (default: here)")
    return p.parse_args(argv)


def config(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    paths = tuple(args.paths.split()) or (".",)
    if not args.base:  # the action's default is empty outside a pull request
        raise PreviewError("no base revision: give `base` (outside a pull_request event)")
    pr, fork = _event(environ)
    report_dir = args.report_dir or os.path.join(
        environ.get("RUNNER_TEMP") or ".", "dyn-gitops-preview"
    )
    server, repo, run = (
        environ.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    return Config(
        paths=paths,
        base=args.base,
        head=args.head,
        dyn_gitops=args.dyn_gitops,
        workdir=args.workdir,
        settings=read_settings(args.settings_file) if args.settings_file else {},
        fail_on_error=args.fail_on_error == "true",
        comment_author=args.comment_author,
        report_dir=Path(report_dir),
        artifact_name=args.artifact_name,
        token=environ.get("PREVIEW_TOKEN", ""),
        api_url=(environ.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
        repository=repo,
        pr=args.pr if args.pr is not None else pr,
        fork=fork,
        run_url=f"{server}/{repo}/actions/runs/{run}" if server and repo and run else "",
        environ=environ,
    )


def _event(environ: Mapping[str, str]) -> tuple[int | None, bool]:
    """(the pull request's number, whether it comes from another repository) of the event
    that started the job; (None, False) outside a pull request."""
    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        return None, False
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PreviewError(f"cannot read the event {path}: {exc}") from None
    pull = event.get("pull_request") if isinstance(event, dict) else None
    if not isinstance(pull, dict) or not isinstance(pull.get("number"), int):
        return None, False
    head_repo = (pull.get("head") or {}).get("repo") or {}
    base_repo = (pull.get("base") or {}).get("repo") or {}
    # a deleted fork has no repo at all
    fork = head_repo.get("full_name") != base_repo.get("full_name")
    return pull["number"], fork


def read_settings(path: str) -> dict[str, str]:
    """The runner settings of ``path`` (a YAML mapping, the keys of ``dyn-gitops.yaml``) as
    the CLI's environment: ``max-file-bytes: 2Mi`` -> ``DYN_GITOPS_MAX_FILE_BYTES=2Mi``. The
    CLI checks each value and refuses an unknown name."""
    import yaml  # a dependency of dyn-gitops, installed beside it

    try:
        with open(path, "rb") as f:
            raw = f.read(SETTINGS_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise PreviewError(f"settings file {path}: {exc.strerror or exc}") from None
    if len(raw) > SETTINGS_FILE_MAX_BYTES:
        raise PreviewError(f"settings file {path}: over {SETTINGS_FILE_MAX_BYTES} bytes")
    try:
        data = yaml.safe_load(raw.decode("utf-8")) or {}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PreviewError(f"settings file {path}: not YAML: {first}") from None
    if not isinstance(data, dict):
        raise PreviewError(f"settings file {path}: expected a mapping of setting: value")
    out: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not _SETTING_NAME.fullmatch(key):
            raise PreviewError(f"settings file {path}: {key!r} is not a setting name")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif not isinstance(value, str | int | float):
            raise PreviewError(f"settings file {path}: {key}: expected a string or a number")
        out[SETTINGS_PREFIX + key.upper().replace("-", "_")] = str(value)
    return out


# ----------------------------------------------------------------------------- the diff
@dataclass(frozen=True)
class PathDiff:
    path: str
    code: int  # dyn-gitops diff's: 0 equal, 1 different, anything else not compared
    markdown: str = ""
    text: str = ""
    errors: str = ""

    @property
    def compared(self) -> bool:
        return self.code in COMPARED


def run_diff(cfg: Config, path: str) -> PathDiff:
    """``dyn-gitops diff`` of ``path``: Markdown for the comment, and the text form, which
    the CLI never shortens, for the report directory."""
    md = _cli(cfg, path, "markdown")
    if md.returncode not in COMPARED:
        return PathDiff(path, md.returncode, errors=md.stderr)
    text = _cli(cfg, path, "text")
    if text.returncode != md.returncode:
        code = text.returncode if text.returncode not in COMPARED else 2
        return PathDiff(path, code, errors=text.stderr or "the two runs of diff disagree")
    return PathDiff(path, md.returncode, markdown=md.stdout, text=text.stdout)


def _cli(cfg: Config, path: str, fmt: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in cfg.environ.items() if k not in TOKEN_ENV}
    env.update(cfg.settings)
    argv = [cfg.dyn_gitops, "diff", f"--base={cfg.base}", f"--head={cfg.head}"]
    try:
        return subprocess.run(
            [*argv, f"--format={fmt}", "--", path],
            env=env,
            cwd=cfg.workdir,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
        )
    except OSError as exc:
        raise PreviewError(f"cannot run {cfg.dyn_gitops}: {exc.strerror or exc}") from None


def status(diffs: Sequence[PathDiff]) -> str:
    if any(not d.compared for d in diffs):
        return "error"
    return "changes" if any(d.code == 1 for d in diffs) else "no-change"


# ----------------------------------------------------------------------------- Markdown
def _visible(text: str) -> str:
    """One line: control and invisible characters as escapes."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def span(text: str) -> str:
    """An inline code span that no backtick run inside can close."""
    shown = _visible(text)
    fence = "`" * (max((len(r) for r in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown[:1] in ("`", " ", "") or shown[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def fenced(lines: Sequence[str]) -> str:
    """A code block that no line inside can close."""
    shown = [_visible(line) for line in lines]
    longest = max((len(r) for r in re.findall("`+", "\n".join(shown))), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([f"{fence}text", *shown, fence])


def size(text: str) -> int:
    return len(text.encode("utf-8"))


@dataclass(frozen=True)
class Section:
    full: str
    short: str  # what stands for it where the whole does not fit


def section(d: PathDiff) -> Section:
    if d.compared:
        full = d.markdown.strip()
        # the CLI's heading and its "Rendered ... : **summary**" line
        top = full.split("\n\n", 2)[:2]
        short = "\n\n".join([*top, "_The details are left out here (comment size limit)._"])
        return Section(full, short)
    lines = d.errors.splitlines() or [f"dyn-gitops diff exited {d.code}"]
    title = f"### ❌ {span(d.path)}: not compared\n\n"
    short = title + fenced(lines[:SHORT_LINES])
    if len(lines) > SHORT_LINES:
        short += f"\n\n_{len(lines) - SHORT_LINES} more lines are left out here._"
    return Section(title + fenced(lines), short)


def verdict(diffs: Sequence[PathDiff]) -> str:
    paths = ", ".join(span(d.path) for d in diffs)
    found = status(diffs)
    if found == "error":
        bad = sum(1 for d in diffs if not d.compared)
        return (
            f"❌ **Not compared**: {bad} of {len(diffs)} paths ({paths}) could not be "
            "compared; a revision that does not render shows its problems below."
        )
    if found == "changes":
        n = sum(1 for d in diffs if d.code == 1)
        return f"**Changes** to the rendered objects in {n} of {len(diffs)} paths ({paths})."
    return f"✅ **No change** to the rendered objects ({paths})."


def fit(head: str, sections: Sequence[Section], tail: str, note: str, limit: int) -> str:
    """``head``, each section (whole, else its short form, else left out) and ``tail``,
    within ``limit`` bytes; ``note`` before ``tail`` when anything was shortened."""
    whole = "\n\n".join([head, *(s.full for s in sections), tail])
    if size(whole) <= limit:
        return whole
    parts = [head]
    used = size(head) + size(tail) + size(note) + 200  # separators and the count below
    left_out = 0
    for s in sections:
        chosen = next((t for t in (s.full, s.short) if used + size(t) + 2 <= limit), None)
        if chosen is None:
            left_out += 1
            continue
        parts.append(chosen)
        used += size(chosen) + 2
    if left_out:
        parts.append(f"_{left_out} more paths are left out here._")
    return "\n\n".join([*parts, note, tail])


def compose(cfg: Config, diffs: Sequence[PathDiff]) -> str:
    """The comment: marker, verdict, one section per path, within :data:`COMMENT_LIMIT`."""
    run = f"[this run]({cfg.run_url})" if cfg.run_url else "this run"
    note = (
        "> [!WARNING]\n> This comment is cut to stay under GitHub's size limit (65,536 "
        f"characters). The full report is in the job summary of {run} and in its "
        f"{span(cfg.artifact_name)} artifact."
    )
    head = f"{MARKER}\n## dyn-gitops preview\n\n{verdict(diffs)}"
    tail = f"<sub>Posted by the dyn-gitops PR preview; full report: {run}.</sub>"
    return fit(head, [section(d) for d in diffs], tail, note, COMMENT_LIMIT)


def summary(cfg: Config, diffs: Sequence[PathDiff], posted: str) -> str:
    """The job summary: the same report within :data:`SUMMARY_LIMIT`, and where it went."""
    note = (
        "> [!WARNING]\n> This summary is cut to stay under the job summary's size limit. "
        f"The full text diff of every path is in the {span(cfg.artifact_name)} artifact."
    )
    head = f"## dyn-gitops preview\n\n{verdict(diffs)}\n\n{posted}"
    tail = f"The text diff of every path is in the {span(cfg.artifact_name)} artifact."
    return fit(head, [section(d) for d in diffs], tail, note, SUMMARY_LIMIT) + "\n"


# ----------------------------------------------------------------------------- GitHub
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: the token goes to the API URL and nowhere else."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class GitHub:
    """The three calls the preview needs, over the REST API (version 2022-11-28)."""

    def __init__(self, api_url: str, token: str) -> None:
        self.api_url = api_url
        self._token = token
        self._opener = urllib.request.build_opener(_NoRedirect)

    def comments(self, repository: str, number: int) -> Iterator[dict[str, Any]]:
        url: str | None = (
            f"{self.api_url}/repos/{repository}/issues/{number}/comments?per_page={PER_PAGE}"
        )
        for _ in range(MAX_PAGES):
            if url is None:
                return
            page, headers = self._call("GET", url)
            if not isinstance(page, list):
                raise PreviewError(f"GitHub API: GET {_route(url)}: expected a list")
            yield from (c for c in page if isinstance(c, dict))
            url = self._next(headers.get("Link", ""))
        if url is not None:
            raise PreviewError(f"pull request #{number} has over {PER_PAGE * MAX_PAGES} comments")

    def create(self, repository: str, number: int, body: str) -> dict[str, Any]:
        url = f"{self.api_url}/repos/{repository}/issues/{number}/comments"
        return _object(self._call("POST", url, {"body": body})[0], url)

    def update(self, repository: str, comment_id: int, body: str) -> dict[str, Any]:
        url = f"{self.api_url}/repos/{repository}/issues/comments/{comment_id}"
        return _object(self._call("PATCH", url, {"body": body})[0], url)

    def _next(self, link: str) -> str | None:
        """The ``rel="next"`` URL of a Link header; only on the API's own origin."""
        for part in link.split(","):
            m = re.fullmatch(r'\s*<([^>]*)>\s*;\s*rel="next"\s*', part)
            if m:
                if not m[1].startswith(self.api_url + "/"):
                    raise PreviewError(f"GitHub API: a next page outside {self.api_url}")
                return m[1]
        return None

    def _call(self, method: str, url: str, body: Any = None) -> tuple[Any, Mapping[str, str]]:
        delays = RETRY_DELAYS if method in ("GET", "PATCH") else ()
        for delay in [*delays, None]:
            try:
                return self._once(method, url, body)
            except urllib.error.HTTPError as exc:
                if delay is None or exc.code not in RETRY_STATUS:
                    raise ApiError(exc.code, method, _route(url), _message(exc)) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if delay is None:
                    reason = getattr(exc, "reason", exc)
                    raise PreviewError(
                        f"cannot reach the GitHub API at {self.api_url}: {reason}"
                    ) from None
            time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, method: str, url: str, body: Any) -> tuple[Any, Mapping[str, str]]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", "dyn-gitops-pr-preview")
        request.add_header("Authorization", f"Bearer {self._token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with self._opener.open(request, timeout=HTTP_TIMEOUT) as resp:
            raw = resp.read(MAX_RESPONSE_BYTES + 1)
            headers = {k: v for k, v in resp.headers.items()}
        if len(raw) > MAX_RESPONSE_BYTES:
            raise PreviewError(f"GitHub API: {method} {_route(url)}: the answer is too large")
        try:
            return json.loads(raw or b"null"), headers
        except ValueError:
            raise PreviewError(f"GitHub API: {method} {_route(url)}: not JSON") from None


def _route(url: str) -> str:
    return urllib.parse.urlsplit(url).path


def _object(found: Any, url: str) -> dict[str, Any]:
    if not isinstance(found, dict) or not isinstance(found.get("id"), int):
        raise PreviewError(f"GitHub API: {_route(url)}: expected a comment")
    return found


def _message(exc: urllib.error.HTTPError) -> str:
    """GitHub's ``message``, one line and short; else the HTTP reason."""
    try:
        found = json.loads(exc.read(64 * 1024) or b"null")
    except (ValueError, OSError):
        found = None
    text = found.get("message") if isinstance(found, dict) else None
    text = text if isinstance(text, str) and text else str(exc.reason or "no message")
    return _visible(" ".join(text.split()))[:300]


# ----------------------------------------------------------------------------- posting
@dataclass(frozen=True)
class Posted:
    url: str  # the comment's, or "" when the preview is in the job summary only
    note: str  # what happened, for the log and the job summary


def publish(cfg: Config, body: str) -> Posted:
    """Create the comment, or update the one with the marker; a fork's pull request, whose
    token may not write, gets the job summary only."""
    if not cfg.token:
        return Posted("", "No token: the preview is not posted as a comment, only here.")
    if cfg.pr is None or not cfg.repository:
        raise PreviewError("no pull request: run on a pull_request event or give --pr")
    gh = GitHub(cfg.api_url, cfg.token)
    try:
        found = next((c for c in gh.comments(cfg.repository, cfg.pr) if _ours(cfg, c)), None)
        if found is None:
            done, verb = gh.create(cfg.repository, cfg.pr, body), "created"
        elif found.get("body") == body:
            done, verb = found, "unchanged"
        else:
            done, verb = gh.update(cfg.repository, found["id"], body), "updated"
    except ApiError as exc:
        if not (cfg.fork and exc.status in (401, 403)):
            raise
        return Posted(
            "",
            "This pull request comes from a fork, whose token may not comment "
            f"({exc.status}): the preview is in this job summary only.",
        )
    url = str(done.get("html_url") or "")
    return Posted(url, f"Comment {verb}: {url}")


def _ours(cfg: Config, comment: Mapping[str, Any]) -> bool:
    body = comment.get("body")
    if not isinstance(body, str) or body.split("\n", 1)[0] != MARKER:
        return False
    if not isinstance(comment.get("id"), int):
        return False
    login = (comment.get("user") or {}).get("login")
    return not cfg.comment_author or login == cfg.comment_author


# ----------------------------------------------------------------------------- reports
def save(cfg: Config, diffs: Sequence[PathDiff], comment: str) -> None:
    """The report directory: the comment and, per path, the full text diff or the errors."""
    cfg.report_dir.mkdir(parents=True, exist_ok=True)
    (cfg.report_dir / "comment.md").write_text(comment, encoding="utf-8")
    for i, d in enumerate(diffs, 1):
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", d.path).strip("._") or "root"
        name = f"{i:02d}-{slug}." + ("diff.txt" if d.compared else "errors.txt")
        (cfg.report_dir / name).write_text(d.text if d.compared else d.errors, encoding="utf-8")


def _append(environ: Mapping[str, str], var: str, text: str) -> None:
    target = environ.get(var)
    if target:
        with open(target, "a", encoding="utf-8") as f:
            f.write(text)


def log_errors(diffs: Sequence[PathDiff]) -> None:
    """The problems in the log too, with workflow commands off: a file name or a value in
    them cannot act as one (``::error::``, ``::add-mask::``)."""
    for d in (d for d in diffs if not d.compared):
        token = uuid.uuid4().hex
        print(f"::stop-commands::{token}")
        print(f"dyn-gitops preview: {_visible(d.path)} not compared:")
        for line in d.errors.splitlines():
            print(f"  {_visible(line)}")
        print(f"::{token}::")


def run(cfg: Config) -> int:
    diffs = [run_diff(cfg, p) for p in cfg.paths]
    found = status(diffs)
    for d in diffs:
        what = {0: "no change", 1: "changes"}.get(d.code, f"not compared (exit {d.code})")
        print(f"dyn-gitops preview: {_visible(d.path)}: {what}")
    log_errors(diffs)
    comment = compose(cfg, diffs)
    save(cfg, diffs, comment)
    failure: PreviewError | None = None
    try:
        posted = publish(cfg, comment)
    except PreviewError as exc:
        failure, posted = exc, Posted("", "The preview could not be posted (see the log).")
    _append(cfg.environ, "GITHUB_STEP_SUMMARY", summary(cfg, diffs, posted.note))
    outputs = {"status": found, "comment-url": posted.url, "report-dir": str(cfg.report_dir)}
    _append(cfg.environ, "GITHUB_OUTPUT", "".join(f"{k}={v}\n" for k, v in outputs.items()))
    if failure is not None:
        raise failure
    # a comment not posted although a token was given (a fork's) is worth a warning
    level = "::warning::" if posted.url == "" and cfg.token else ""
    print(f"{level}dyn-gitops preview: {_command_data(posted.note)}")
    if found == "error":
        bad = _command_data(", ".join(_visible(d.path) for d in diffs if not d.compared))
        level = "::error::" if cfg.fail_on_error else "::warning::"
        print(f"{level}dyn-gitops preview: not compared: {bad}", file=sys.stderr)
    return 1 if found == "error" and cfg.fail_on_error else 0


def _command_data(text: str) -> str:
    """``text`` as the data of a workflow command (one line)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    try:
        cfg = config(parse_args(argv), env)
        return run(replace(cfg, report_dir=cfg.report_dir.resolve()))
    except PreviewError as exc:
        print(f"::error::dyn-gitops preview: {_command_data(_visible(str(exc)))}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: its type and place, never its text (it may hold input)
        if env.get("RUNNER_DEBUG") == "1":
            traceback.print_exc()
        where = traceback.extract_tb(exc.__traceback__)[-1:]
        at = f" at line {where[0].lineno}" if where else ""
        print(
            f"::error::dyn-gitops preview: internal error: {type(exc).__name__}{at} "
            "(re-run with debug logging for a traceback; please report it)",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
