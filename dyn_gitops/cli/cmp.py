"""``dyn-gitops cmp ...``: the Argo CD config-management plugin commands.

Only click is imported here; each command imports what it needs, so the CLI start-up
stays small (see docs/argocd.md).
"""

from __future__ import annotations

import os
import sys

import click

from .. import settings
from ..stdio import write_stdout
from .help import Group
from .outcome import reported


@click.group(cls=Group)
def cmp() -> None:
    """Argo CD config-management plugin (sidecar) commands; see docs/argocd.md."""


@cmp.command()
@click.option(
    "--server",
    type=click.Choice(["auto", "off"]),
    default="auto",
    show_default=True,
    help="auto: use the sidecar's warm render server when one runs, and start one "
    "under Argo CD; off: render in this process.",
)
def generate(server: str) -> None:
    """Render the current directory with the Argo CD plugin environment.

    Reads ARGOCD_APP_NAMESPACE (default namespace), ARGOCD_ENV_DYN_GITOPS_* and
    ARGOCD_APP_PARAMETERS (settings), ARGOCD_APP_REVISION and ARGOCD_APP_SOURCE_PATH
    (provenance), KUBE_VERSION and KUBE_API_VERSIONS (checked against the output).
    """
    from .. import __version__
    from ..argocd import client

    if server == "auto":
        code = client.via_server(__version__)
        if code is not None and code != client.SERVER_BUSY:
            sys.exit(code)
        if code is None and os.environ.get("ARGOCD_APP_NAME"):  # busy: one runs already
            client.start_server(sys.executable, __version__)
    from ..argocd.generate import run

    sys.exit(run(dict(os.environ)))


@cmp.command()
def parameters() -> None:
    """Print the parameter announcements (JSON), as plugin.yaml carries them."""
    from ..argocd.plugin import parameters_json

    with reported():
        write_stdout(parameters_json())


@cmp.command("plugin-yaml")
@click.option(
    "--discovery",
    is_flag=True,
    help="The opt-in variant that also matches Applications without a plugin name.",
)
def plugin_yaml(discovery: bool) -> None:
    """Print plugin.yaml (the repository's copy must equal this output)."""
    from ..argocd.plugin import plugin_yaml as make

    with reported():
        write_stdout(make(discovery=discovery))


@cmp.command()
@click.option(
    "--socket",
    "socket_path",
    default=None,
    metavar="PATH",
    help="Unix socket (default: $TMPDIR/dyn-gitops-<uid>/render-<version>.sock, "
    "where generate looks for it).",
)
@click.option(
    "--idle-timeout",
    type=float,
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="Exit after this long without a request (0: never).",
)
def serve(socket_path: str | None, idle_timeout: float) -> None:
    """Run the warm render server in the foreground (generate starts one by itself)."""
    from .. import __version__
    from ..argocd import client, server

    sys.exit(
        server.serve(socket_path or client.socket_path(__version__), idle_timeout=idle_timeout)
    )


@cmp.command(
    "init",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0.0),
    default=settings.SIDECAR_STOP_GRACE_S,
    show_default=True,
    metavar="SECONDS",
    help="How long the server has to exit after a stop signal before it is killed.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def init(grace: float, command: tuple[str, ...]) -> None:
    """Run COMMAND (default: /var/run/argocd/argocd-cmp-server) as the sidecar's init.

    The image's entrypoint: it forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT, kills what is
    left after --grace seconds (argocd-cmp-server never exits by itself), reaps orphans, and
    exits 0 after a stop signal, otherwise with COMMAND's exit code.
    """
    from ..argocd import init as sidecar_init
    from ..argocd.plugin import CMP_SERVER_PATH

    argv = command or (CMP_SERVER_PATH,)
    try:
        code = sidecar_init.run(argv, grace)
    except OSError as exc:
        click.echo(f"dyn-gitops cmp init: cannot run {argv[0]}: {exc.strerror}", err=True)
        sys.exit(2)
    sys.exit(code)


@cmp.command("install-launcher")
@click.argument("dest")
def install_launcher(dest: str) -> None:
    """Write the sidecar's fast ``dyn-gitops`` launcher to DEST (the Dockerfile runs this).

    The launcher answers ``dyn-gitops cmp generate`` through the warm render server in a
    few milliseconds and runs the full CLI for everything else.
    """
    from pathlib import Path

    from .. import __file__ as package_init
    from .. import __version__

    parent = str(Path(package_init).resolve().parent.parent)  # the directory holding dyn_gitops
    python = sys.executable
    text = (
        f"#!{python} -IS\n"
        "# dyn-gitops launcher for the Argo CD sidecar (written by `dyn-gitops cmp "
        "install-launcher`):\n"
        "# `cmp generate` goes to the warm render server; anything else runs the full "
        "CLI.\n"
        "import sys\n"
        f"sys.path.append({parent!r})\n"
        "from dyn_gitops.argocd.client import launch\n"
        f"launch({python!r}, {__version__!r})\n"
    )
    target = Path(dest)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.replace(tmp, target)  # atomic, also when DEST is the running dyn-gitops script
    click.echo(f"dyn-gitops: wrote the launcher to {dest}", err=True)
