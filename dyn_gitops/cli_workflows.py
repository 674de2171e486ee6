"""CLI commands for the workflows: ``hydrate``, ``diff``, ``krm``, ``post-render``.

They register themselves on :data:`dyn_gitops.cli.main` (cli.py imports this module, in
one line after its own commands). Everything heavier than click is imported inside the
commands, so start-up stays fast for the Argo CD plugin.

Exit codes are the CLI's (0 ok, 1 invalid input, 2 usage, 3 internal error), plus
``diff``'s own (0 equal, 1 different, 2 error) and :data:`EXIT_BRANCH_MOVED` for hydrate.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from .cli import _fail, _flags, _setting_options, load, main, write_stdout
from .display import printable
from .errors import ExitCode

#: hydrate lost a race: the branch moved (or was locked) while it worked; re-run it
EXIT_BRANCH_MOVED = 4


def _exit(lines: list[str], code: int) -> NoReturn:
    for line in lines:
        click.echo(printable(line), err=True)
    sys.exit(code)


def _problems(problems: list[Any], what: str) -> list[str]:
    n = len(problems)
    return [str(p) for p in problems] + [
        f"dyn-gitops: {n} problem{'s' if n != 1 else ''} found; {what}"]


def _author(value: str | None) -> Any:
    if value is None:
        return None
    from .workflows.gitstore import Identity

    try:
        return Identity.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--author") from None


# ---------------------------------------------------------------------------- hydrate
@main.command()
@click.argument("path", default=".", required=False)
@click.option("--rev", default="HEAD", show_default=True, metavar="REV",
              help="Render PATH as of this Git revision (read from the object store).")
@click.option("--branch", default="rendered", show_default=True,
              help="Branch that receives the rendered tree (created if missing). It is "
                   "never checked out, and only ever fast-forwarded.")
@click.option("--out-dir", default=None, metavar="DIR",
              help="Write the rendered tree to DIR instead of committing it "
                   "(for `flux push artifact`).")
@click.option("--target-path", default="", metavar="DIR",
              help="Replace only this directory of the branch (several apps, one branch).")
@click.option("-m", "--message", default=None, help="Subject line of the commit.")
@click.option("--author", default=None, metavar="'NAME <EMAIL>'",
              help="Author and committer (default: the repository's user.name and "
                   "user.email, else dyn-gitops).")
@click.option("--no-cache", is_flag=True,
              help="Render every input file again instead of reusing unchanged outputs.")
@click.option("--allow-rewind", is_flag=True,
              help="Publish even if REV does not descend from the commit the branch was last "
                   "rendered from (a rollback, or history rewritten on purpose).")
@_setting_options
def hydrate(path: str, rev: str, branch: str, out_dir: str | None, target_path: str,
            message: str | None, author: str | None, no_cache: bool, allow_rewind: bool,
            **values: Any) -> None:
    """Render PATH at a commit and publish the result as a commit on a branch.

    Prints the branch tip (the new commit, or the unchanged tip) on stdout. Exit codes:
    0 published or up to date; 1 invalid input; 2 usage, including a rewind: the branch
    was last rendered from a commit that REV does not descend from (older, or on rewritten
    history; both commit ids are printed; --allow-rewind publishes it anyway); 4 the
    branch moved while hydrate worked: nothing was lost, run it again.
    """
    from .errors import RenderError
    from .workflows import gitstore
    from .workflows import hydrate as hyd

    who = _author(author)
    src, resolved = load(path, rev, values)
    try:
        repo = gitstore.open_repo(".")
        source_path = gitstore.repo_relative(repo, path)
        if out_dir:
            from .workflows.outdir import to_dir

            p = to_dir(out_dir, src, resolved.settings, rev=rev, source_path=source_path,
                       use_cache=not no_cache)
            _report(p, f"wrote {out_dir}")
            return
        req = hyd.Request(rev=rev, source_path=source_path, branch=branch,
                          target_path=target_path, message=message, author=who,
                          use_cache=not no_cache, allow_rewind=allow_rewind)
        result = hyd.to_branch(".", src, resolved.settings, req)
    except RenderError as exc:
        _fail(_problems(exc.problems, "nothing hydrated"), ExitCode.INVALID_INPUT)
    except gitstore.BranchMoved as exc:
        _exit([f"dyn-gitops: {exc}"], EXIT_BRANCH_MOVED)
    except (hyd.HydrateUsageError, FileExistsError, FileNotFoundError, LookupError) as exc:
        _fail([f"dyn-gitops: {exc}"], ExitCode.USAGE)
    if result.commit is None:
        _report(result.plan, f"{branch} is up to date at {result.tip[:12]}; nothing committed")
    else:
        _report(result.plan, f"committed {result.commit[:12]} on {branch}")
    write_stdout(result.tip + "\n")


def _report(p: Any, what: str) -> None:
    how = ("full render" if p.full else
           f"{len(p.rendered)} input files rendered, {len(p.reused)} reused")
    click.echo(f"dyn-gitops: {what}: {p.objects} objects ({how})", err=True)


# ---------------------------------------------------------------------------- diff
@main.command("diff")
@click.argument("path", default=".", required=False)
@click.option("--base", required=True, metavar="REV", help="The revision to compare from.")
@click.option("--head", default="HEAD", show_default=True, metavar="REV",
              help="The revision to compare to.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text",
              show_default=True, help="text for a terminal, markdown for a PR comment.")
@_setting_options
def diff_cmd(path: str, base: str, head: str, fmt: str, **values: Any) -> None:
    """Render PATH at two revisions and show what changes in the workloads, field by field.

    Exit code 0: no differences; 1: differences; 2: an error (nothing on stdout), such as
    a PATH that exists in neither revision (in one of them: all added or all removed).
    """
    import os

    from .settings import SettingsError
    from .workflows import report
    from .workflows.diff import RevisionError, diff

    try:
        result = diff(".", base, head, "" if path == "." else path, env=dict(os.environ),
                      flags=_flags(values))
    except RevisionError as exc:
        _exit(_problems(exc.problems, f"{exc.rev} does not render; nothing compared"), 2)
    except SettingsError as exc:
        _exit([f"dyn-gitops: {p}" for p in exc.problems], 2)
    except (FileNotFoundError, LookupError, NotADirectoryError, PermissionError) as exc:
        _exit([f"dyn-gitops: {exc}"], 2)
    write_stdout(report.markdown(result) if fmt == "markdown" else report.text(result))
    sys.exit(0 if result.equal else 1)


def _read_stdin(limit: int) -> str:
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        _exit([f"dyn-gitops: stdin is more than {limit} bytes (setting max-file-bytes sets "
               "the limit); nothing done"], ExitCode.INVALID_INPUT)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        _exit([f"dyn-gitops: stdin is not UTF-8 ({exc.reason} at byte {exc.start})"],
              ExitCode.INVALID_INPUT)


# ---------------------------------------------------------------------------- krm
@main.command()
@_setting_options
def krm(**values: Any) -> None:
    """Run as a KRM function (kustomize exec plugin, kpt): ResourceList in, ResourceList out.

    Settings come from the functionConfig (ConfigMap data, or spec of any other kind),
    over the environment; flags win. Problems are returned as results, with exit code 1.
    """
    import os

    from .workflows import krm as fn

    env, flags = dict(os.environ), _flags(values)
    limits = fn.settings_for_reading(env, flags)
    text = _read_stdin(limits.max_file_bytes * fn.STDIN_FACTOR)
    try:
        rl = fn.parse(text, limits)
    except fn.InputError as exc:
        _exit([f"dyn-gitops krm: {exc}"], ExitCode.INVALID_INPUT)
    outcome = fn.run(rl, env=env, flags=flags)
    out = outcome.text  # size-checked in fn.run
    # stderr first: the problems are still told when stdout then turns out to be closed
    if not outcome.ok:
        lines = _problems(outcome.problems, "items returned unchanged")
    else:  # on success: warnings (also in results)
        lines = [f"{warning} (warning)" for warning in outcome.problems]
    for line in lines:
        click.echo(printable(line), err=True)
    write_stdout(out)
    if not outcome.ok:
        sys.exit(int(ExitCode.INVALID_INPUT))


# ---------------------------------------------------------------------------- post-render
@main.command("post-render")
@_setting_options
def post_render(**values: Any) -> None:
    """Helm post-renderer: all manifests on stdin, the expanded manifests on stdout.

    Helm 4: `helm install --post-renderer dyn-gitops` with the plugin in charts/helm-plugin;
    Helm 3: `--post-renderer dyn-gitops --post-renderer-args post-render`.
    """
    import os

    from .cli import fail_render, run_render
    from .emit import OutputTooLarge, render_text
    from .read import Source
    from .settings import ENV_PREFIX, SettingsError, resolve
    from .workflows import postrender

    try:
        resolved = resolve(env=dict(os.environ), env_prefixes=(ENV_PREFIX,),
                           flags=_flags(values))
    except SettingsError as exc:
        _fail([f"dyn-gitops: {p}" for p in exc.problems], ExitCode.USAGE)
    text = _read_stdin(resolved.settings.max_file_bytes)
    files = postrender.split(text)
    result = run_render(Source(files=files, root=postrender.STDIN), resolved)
    if postrender.HELM_FILENAME in text:  # Helm 4: it files objects by this annotation
        postrender.stamp(result.objects, {f.path for f in files} - {postrender.STDIN})
    try:
        text = render_text(result.objects, resolved.settings.output_format,
                           max_bytes=resolved.settings.max_output_bytes)
    except OutputTooLarge as exc:
        fail_render(exc)
    write_stdout(text)
