"""How a one-shot ``dyn-gitops`` process runs and ends (issue 12, start-up cost).

Nearly everything a render allocates stays alive to its end (modules, models, the rendered
objects), so the cyclic garbage collector's passes find next to nothing while walking a heap
that only grows, and freeing that heap object by object at exit is work nobody needs.
Without both, a render of 1 DGD takes about a quarter less CPU and one of 1,000 DGDs about
a fifth less (bench/render_vs_kustomize.py), at the same peak RSS. So the console script
runs the CLI with the collector paused and ends without the interpreter's teardown; a
long-running command (``cmp serve``, the warm render server) turns the collector back on.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import NoReturn


def main() -> NoReturn:
    """The ``dyn-gitops`` console script: :func:`.cli.entry` in a one-shot process (the
    collector paused before the first import)."""
    gc.disable()
    from . import lifetime
    from .cli import entry

    lifetime.one_shot()

    try:
        entry()
    except SystemExit as exc:
        finish(exc)
    finish(SystemExit(0))  # pragma: no cover - entry() always ends in SystemExit


def finish(exc: SystemExit) -> NoReturn:
    """Exit with ``exc``'s status as the interpreter would, minus freeing every object:
    atexit handlers run, stdout and stderr are flushed. Anything unusual (a status that is
    not a number, another thread alive, a flush that fails) leaves through ``exc`` itself,
    so that the interpreter handles it as it always has (a failed flush at exit: status
    120 and its message)."""
    code = 0 if exc.code is None else exc.code
    if not isinstance(code, int) or threading.active_count() > 1:
        raise exc
    atexit._run_exitfuncs()  # as at a normal exit; each runs once (the list is cleared)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise exc from None
    os._exit(code)
