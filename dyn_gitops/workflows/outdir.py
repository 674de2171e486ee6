"""Hydrate into a directory (for `flux push artifact`): the same tree as the branch.

The directory is replaced as a whole by a rename, so a reader never sees half a result,
and it is replaced only if it is empty or was written by hydrate (it holds our metadata).
"""

from __future__ import annotations

from pathlib import Path

from ..emit import checked_target, replace_dir, write_new
from ..read import Source
from ..settings import RenderSettings
from .hydrate import METADATA_FILE, load_cache, metadata_text, tree_content
from .incremental import CACHE_FILE, Plan, Previous, Reused, blob_id, plan


def _previous(target: Path) -> dict[str, Path]:
    """The files of the last run (regular files only; links are never read)."""
    if not target.exists():
        return {}
    files = {
        p.relative_to(target).as_posix(): p
        for p in sorted(target.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
    if files and METADATA_FILE not in files:
        raise FileExistsError(
            f"{target} exists and was not written by dyn-gitops hydrate "
            f"(no {METADATA_FILE}); refusing to replace it"
        )
    return files


def to_dir(
    out_dir: str,
    src: Source,
    settings: RenderSettings,
    *,
    rev: str,
    source_path: str,
    use_cache: bool = True,
    cache_key: bytes | None = None,
) -> Plan:
    target = checked_target(out_dir)  # no link followed, no file replaced
    old = _previous(target)
    previous = None
    if use_cache and old:
        ids = {rel: blob_id(path.read_bytes()) for rel, path in old.items()}
        cache = load_cache(old[CACHE_FILE].read_bytes()) if CACHE_FILE in old else None
        previous = Previous(
            cache, ids.get, lambda rel: old[rel].read_bytes() if rel in old else None
        )
    p = plan(src, settings, previous, key=cache_key)
    files = tree_content(p, metadata_text(src.commit, rev, source_path, settings))

    def fill(tmp: Path) -> None:
        for rel, content in files.items():
            # Reused: verified, the same blob id as the cache says
            write_new(tmp, rel, old[rel].read_bytes() if isinstance(content, Reused) else content)

    replace_dir(target, fill)
    return p
