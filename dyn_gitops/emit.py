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

from .errors import Problem, RenderError
from .settings import RenderSettings
from .yamlout import dump_all

OUT_DIR_MARKER = ".dyn-gitops-output"


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """A ``---``-separated YAML stream; long strings are never folded."""
    return dump_all(objects)


def to_json(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2,
                      ensure_ascii=False, default=_json_default) + "\n"


def _json_default(value: Any) -> Any:
    """Timestamps in pass-through objects (YAML parses them to datetime) as RFC 3339."""
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


class OutputTooLarge(RenderError):
    """Setting max-output-bytes: the output of one run is larger; nothing was written."""


def size_problem(size: int, settings: RenderSettings, where: str) -> Problem | None:
    """Setting max-output-bytes, checked where the output is made (measuring it anywhere
    earlier would serialize everything twice)."""
    return _size_problem(size, settings.max_output_bytes, where)


def _size_problem(size: int, limit: int | None, where: str, *, so_far: bool = False
                  ) -> Problem | None:
    if limit is None or size <= limit:
        return None
    return Problem(where, 0, "", "", f"the output {'reaches' if so_far else 'is'} {size} "
                                     f"bytes, more than the {limit} allowed (setting "
                                     "max-output-bytes); nothing written")


def render_text(objects: list[dict[str, Any]], output_format: str, *,
                max_bytes: int | None = None) -> str:
    """The stream; :class:`OutputTooLarge` if it has more than ``max_bytes`` bytes."""
    text = to_json(objects) if output_format == "json" else to_yaml(objects)
    too_big = _size_problem(len(text.encode("utf-8")), max_bytes, "<stdout>")
    if too_big is not None:
        raise OutputTooLarge([too_big])
    return text


def object_filename(obj: dict[str, Any]) -> str:
    """Stable per-object path: ``<namespace|_cluster>/<kind>.<group>_<name>.yaml``."""
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = str(obj.get("kind", "")).lower() + (f".{group}" if group else "")
    ns = str(meta.get("namespace") or "_cluster")
    return f"{ns}/{kind}_{meta.get('name')}.yaml"


def write_out_dir(objects: list[dict[str, Any]], out_dir: str, *,
                  max_bytes: int | None = None) -> list[str]:
    """Replace ``out_dir`` with one file per object, atomically (rename of a sibling dir).

    An existing ``out_dir`` is replaced only if it is empty or was written by us (it holds
    our marker file); anything else is refused, so no user file is ever deleted. More than
    ``max_bytes`` in all is :class:`OutputTooLarge`, and nothing changes.
    """
    target = Path(out_dir)
    if target.exists():
        entries = list(target.iterdir())
        if entries and not (target / OUT_DIR_MARKER).exists():
            raise FileExistsError(
                f"{out_dir} exists and was not written by dyn-gitops (no {OUT_DIR_MARKER}); "
                "refusing to replace it")
    written = []

    def fill(tmp: Path) -> None:
        total = 0
        for obj in objects:
            rel = object_filename(obj)
            path = tmp / rel
            data = to_yaml([obj]).encode("utf-8")
            total += len(data)
            too_big = _size_problem(total, max_bytes, out_dir, so_far=True)
            if too_big is not None:
                raise OutputTooLarge([too_big])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written.append(rel)
        (tmp / OUT_DIR_MARKER).write_text("written by dyn-gitops; replaced on every run\n")

    replace_dir(target, fill)
    return written


def replace_dir(target: Path, fill: Callable[[Path], None]) -> None:
    """Build a sibling directory with ``fill`` and swap it in by renames, so a reader sees
    the old tree or the new one, never half of one; nothing changes if ``fill`` fails."""
    parent = target.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    try:
        fill(tmp)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=parent))
            os.rename(target, old / "x")
            os.rename(tmp, target)
            shutil.rmtree(old)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
