"""``hydrate``: render a path at a commit and publish it as a commit on a branch (or a
directory, for ``flux push artifact``).

Exit codes are the CLI's (0 ok, 1 invalid input, 2 usage, 3 internal error), plus
4 (:attr:`~dyn_gitops.errors.ExitCode.BRANCH_MOVED`): the branch moved while hydrate worked.
"""

from __future__ import annotations

import os
from typing import Any

import click

from .. import context
from ..display import count, printable
from ..errors import DynGitopsError, ExitCode
from ..stdio import write_stdout
from .help import Command, Option
from .options import input_options, report_skipped, runner, setting_options
from .outcome import fail, fail_with, reported


def _author(value: str | None) -> Any:
    if value is None:
        return None
    from ..workflows.gitstore import Identity

    try:
        return Identity.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--author") from None


@click.command(cls=Command)
@click.argument("path", default=".", required=False)
@click.option(
    "--rev",
    default="HEAD",
    show_default=True,
    metavar="REV",
    cls=Option,
    section="input",
    help="Render PATH as of this Git revision (read from the object store).",
)
@input_options
@click.option(
    "--branch",
    cls=Option,
    section="output",
    default="rendered",
    show_default=True,
    help="Branch that receives the rendered tree (created if missing). It is "
    "never checked out, and only ever fast-forwarded.",
)
@click.option(
    "--out-dir",
    cls=Option,
    section="output",
    default=None,
    metavar="DIR",
    help="Write the rendered tree to DIR instead of committing it (for `flux push artifact`).",
)
@click.option(
    "--target-path",
    cls=Option,
    section="output",
    default="",
    metavar="DIR",
    help="Replace only this directory of the branch (several apps, one branch).",
)
@click.option(
    "-m",
    "--message",
    default=None,
    cls=Option,
    section="output",
    help="Subject line of the commit.",
)
@click.option(
    "--author",
    cls=Option,
    section="output",
    default=None,
    metavar="'NAME <EMAIL>'",
    help="Author and committer (default: the repository's user.name and "
    "user.email, else dyn-gitops).",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Render every input file again instead of reusing unchanged outputs.",
)
@click.option(
    "--allow-rewind",
    is_flag=True,
    help="Publish even if REV does not descend from the commit the branch was last "
    "rendered from (a rollback, or history rewritten on purpose).",
)
@setting_options
def hydrate(
    path: str,
    rev: str,
    branch: str,
    out_dir: str | None,
    target_path: str,
    message: str | None,
    author: str | None,
    no_cache: bool,
    allow_rewind: bool,
    verbose: bool,
    **values: Any,
) -> None:
    """Render PATH at a commit and publish the result as a commit on a branch.

    Prints the branch tip (the new commit, or the unchanged tip) on stdout. Exit codes:
    0 published or up to date; 1 invalid input; 2 usage, including a rewind: the branch
    was last rendered from a commit that REV does not descend from (older, or on rewritten
    history; both commit ids are printed; --allow-rewind publishes it anyway); 4 the
    branch moved while hydrate worked: nothing was lost, run it again.
    """
    from ..workflows import gitstore
    from ..workflows import hydrate as hyd

    who = _author(author)
    with reported("nothing hydrated"):
        ctx = context.open_path(path, rev, runner=runner(values))
        report_skipped(ctx.source, verbose)
    src, settings = ctx.source, ctx.settings
    try:
        key = hyd.cache_key(os.environ)
        repo = gitstore.open_repo(path)
        source_path = gitstore.repo_relative(repo, path)
        if out_dir:
            with context.shown_from_here(src):
                _to_dir(out_dir, ctx, rev, source_path, use_cache=not no_cache, key=key)
            return
        req = hyd.Request(
            rev=rev,
            source_path=source_path,
            branch=branch,
            target_path=target_path,
            message=message,
            author=who,
            use_cache=not no_cache,
            allow_rewind=allow_rewind,
            cache_key=key,
        )
        with context.shown_from_here(src):
            result = hyd.to_branch(gitstore.workdir(repo), src, settings, req)
    except DynGitopsError as exc:  # BranchMoved exits 4: run it again
        fail_with(exc, "nothing hydrated")
    except (FileExistsError, FileNotFoundError, LookupError) as exc:
        fail([f"dyn-gitops: {exc}"], ExitCode.USAGE)
    _report(result.plan, _outcome(result, branch), _where(branch, target_path))
    with reported():
        write_stdout(result.tip + "\n")


def _to_dir(
    out_dir: str, ctx: Any, rev: str, source_path: str, *, use_cache: bool, key: bytes | None
) -> None:
    from ..workflows.outdir import to_dir

    p = to_dir(
        out_dir,
        ctx.source,
        ctx.settings,
        rev=rev,
        source_path=source_path,
        use_cache=use_cache,
        cache_key=key,
    )
    _report(p, f"wrote {out_dir}", f"{out_dir.rstrip('/')}/")


def _outcome(result: Any, branch: str) -> str:
    if result.commit is None:
        return f"{branch} is up to date at {result.tip[:12]}; nothing committed"
    return f"committed {result.commit[:12]} on {branch}"


def _where(branch: str, target_path: str) -> str:
    """How a warning names a file of the branch: ``branch:target/path``."""
    target = target_path.strip("/")
    return f"{branch}:{target}/" if target else f"{branch}:"


def _report(p: Any, what: str, where: str) -> None:
    """Outputs found edited (``where``: the branch and directory, or the out dir), why
    nothing was reused, then the counts."""
    for warning in p.warnings:
        click.echo(f"dyn-gitops: warning: {printable(where)}{warning}", err=True)
    for note in p.notes:
        click.echo(f"dyn-gitops: note: {note}", err=True)
    how = (
        "full render"
        if p.full
        else f"{len(p.rendered)} input files rendered, {len(p.reused)} reused"
    )
    click.echo(f"dyn-gitops: {what}: {count(p.objects, 'object')} ({how})", err=True)
