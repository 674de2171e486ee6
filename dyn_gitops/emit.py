"""Emit: a YAML stream, a JSON List, or one file per object under a directory.

Output is built completely in memory first; nothing is written when rendering failed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import objpath
from .errors import Problem, RenderError
from .settings import RenderSettings
from .yamlout import dump_all

OUT_DIR_MARKER = ".dyn-gitops-output"


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """A ``---``-separated YAML stream; long strings are never folded."""
    return dump_all(objects)


def to_json(objects: list[dict[str, Any]]) -> str:
    return (
        json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": objects},
            indent=2,
            ensure_ascii=False,
            default=_json_default,
        )
        + "\n"
    )


def _json_default(value: Any) -> Any:
    """Timestamps in pass-through objects (YAML parses them to datetime) as RFC 3339."""
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


class OutputTooLarge(RenderError):
    """Setting max-output-bytes: the output of one run is larger; nothing was written."""


def utf8_size(text: str) -> int:
    """The size of ``text`` in UTF-8, without encoding a copy of an ASCII text (its size is
    its length; ``str.isascii`` is a flag lookup): the stream of 1,000 DGDs is 22 MB."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def size_problem(size: int, settings: RenderSettings, where: str) -> Problem | None:
    """Setting max-output-bytes, checked where the output is made (measuring it anywhere
    earlier would serialize everything twice)."""
    return _size_problem(size, settings.max_output_bytes, where)


def _size_problem(
    size: int, limit: int | None, where: str, *, so_far: bool = False
) -> Problem | None:
    if limit is None or size <= limit:
        return None
    return Problem(
        where,
        0,
        message=f"the output {'reaches' if so_far else 'is'} {size} "
        f"bytes, more than the {limit} allowed (setting "
        "max-output-bytes); nothing written",
    )


def render_text(
    objects: list[dict[str, Any]], output_format: str, *, max_bytes: int | None = None
) -> str:
    """The stream; :class:`OutputTooLarge` if it has more than ``max_bytes`` bytes."""
    text = to_json(objects) if output_format == "json" else to_yaml(objects)
    too_big = _size_problem(utf8_size(text), max_bytes, "<stdout>")
    if too_big is not None:
        raise OutputTooLarge([too_big])
    return text


def object_filename(obj: dict[str, Any]) -> str:
    """Stable per-object path ``<namespace|_cluster>/<kind>.<group>_<name>.yaml``, checked
    (see :mod:`dyn_gitops.objpath`, the one path rule); raises ``objpath.PathError``."""
    return objpath.relpath(obj)


def write_out_dir(
    objects: list[dict[str, Any]], out_dir: str, *, max_bytes: int | None = None
) -> list[str]:
    """Replace ``out_dir`` with one file per object, atomically (rename of a sibling dir).

    An existing ``out_dir`` is replaced only if it is empty or was written by us (it holds
    our marker file); anything else is refused, so no user file is ever deleted. Every path
    is computed and checked before anything is written. More than ``max_bytes`` in all is
    :class:`OutputTooLarge`, and nothing changes.
    """
    target = checked_target(out_dir)
    by_path = objpath.assign(objects)
    if target.exists():
        entries = list(target.iterdir())
        if entries and not (target / OUT_DIR_MARKER).is_file():
            raise FileExistsError(
                f"{out_dir} exists and was not written by dyn-gitops (no {OUT_DIR_MARKER}); "
                "refusing to replace it"
            )

    def fill(tmp: Path) -> None:
        total = 0
        for rel, obj in by_path.items():
            data = to_yaml([obj]).encode("utf-8")
            total += len(data)
            too_big = _size_problem(total, max_bytes, out_dir, so_far=True)
            if too_big is not None:
                raise OutputTooLarge([too_big])
            write_new(tmp, rel, data)
        write_new(tmp, OUT_DIR_MARKER, b"written by dyn-gitops; replaced on every run\n")

    replace_dir(target, fill)
    return list(by_path)


def write_new(root: Path, rel: str, data: bytes) -> None:
    """Write a new file at ``root/rel``. ``rel`` is relative, with no empty, ``.``, ``..``
    or NUL part (checked again here, whoever computed it), and the file must not exist yet:
    two outputs can never overwrite one another, not even on a case-insensitive disk."""
    parts = rel.split("/")
    if rel.startswith("/") or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        raise objpath.PathError(f"unsafe output path {rel!r}")
    path = root.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "xb") as f:
        f.write(data)


def checked_target(out_dir: str | Path) -> Path:
    """The output directory as an absolute path, if it may be replaced.

    A symbolic link is refused rather than followed: replacing it would either swap the link
    for a directory (surprising whoever made it) or write wherever it points, which may be
    outside what the caller meant (a link committed to a repository). A file is refused too.
    """
    target = Path(os.path.abspath(out_dir))
    if target == target.parent:
        raise FileExistsError(f"{out_dir}: refusing to replace the root directory")
    if target.is_symlink():
        raise FileExistsError(
            f"{out_dir} is a symbolic link; refusing to replace or follow "
            "it (give the directory it points to)"
        )
    if target.exists() and not target.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a directory")
    return target


def replace_dir(target: Path, fill: Callable[[Path], None]) -> None:
    """Build a sibling directory with ``fill`` and swap it in by renames, so a reader sees
    the old tree or the new one, never half of one.

    Nothing changes if ``fill`` or a rename fails, and no ``.<name>.*`` sibling is left
    behind, whatever happens (an exception, Ctrl-C): the old tree is renamed back when the
    new one cannot take its place, and both temporary directories are removed at the end
    (unless the old tree could not even be renamed back: then it stays where it is).
    """
    target = checked_target(target)
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    old: Path | None = None
    try:
        fill(tmp)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=parent))
            os.rename(target, old / "x")
            try:
                os.rename(tmp, target)
            except BaseException:
                os.rename(old / "x", target)  # the old tree back where it was
                raise
        else:
            os.rename(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        # the old tree is kept only if it could not be put back (never lose it)
        if old is not None and not ((old / "x").exists() and not os.path.lexists(target)):
            shutil.rmtree(old, ignore_errors=True)
