"""The one way esopt writes an artifact: complete or not at all, durable, with normal modes.

Files are written beside their target, flushed to disk (fsync), given the modes a plain
`open()` would give (0644/0755 under the usual umask; `mkstemp`/`mkdtemp` make 0600/0700),
and renamed into place; the parent directory is synced so that the rename survives a
power cut. A directory (a checkpoint) is built in a temporary sibling and swapped in: the
old copy is moved aside, the new one renamed in, then the old one removed; a failure in
between puts the old one back, and a process killed in between leaves the old copy beside
the target, which the next access restores (`recover_directory`). Temporary copies left
by killed writers are removed by the next write of the same target.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


UMASK = _umask()
FILE_MODE = 0o666 & ~UMASK
DIR_MODE = 0o777 & ~UMASK
_TMP = ".tmp-"
_OLD = ".old-"


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a file's or a directory's data and metadata to disk."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if Path(path).is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _siblings(target: Path, tag: str) -> list[Path]:
    return sorted(target.parent.glob(f".{target.name}{tag}*"))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; write it inside the block. On a clean exit it
    is synced, given the normal file mode and renamed to `path`; on an error, removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in _siblings(path, _TMP):  # a killed writer's leftover
        _remove(stale)
    tmp = path.parent / f".{path.name}{_TMP}{uuid.uuid4().hex[:8]}"
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    return write_bytes_atomic(path, text.encode())


def write_json_atomic(path: str | os.PathLike, obj, **dumps) -> Path:
    """Write `obj` as JSON (indented, sorted keys unless told otherwise) atomically."""
    dumps = {"indent": 2, "sort_keys": True, **dumps}
    return write_text_atomic(path, json.dumps(obj, **dumps) + "\n")


def write_parquet_atomic(table: pa.Table, path: str | os.PathLike,
                         metadata: Mapping[str, str] | None = None) -> Path:
    """Write a Parquet file atomically; `metadata` is merged into the schema's metadata."""
    if metadata:
        merged = dict(table.schema.metadata or {})
        merged.update({k.encode(): v.encode() for k, v in metadata.items()})
        table = table.replace_schema_metadata(merged)
    with atomic_file(path) as tmp:
        pq.write_table(table, tmp)
    return Path(path)


def recover_directory(target: str | os.PathLike) -> bool:
    """Put back the old copy of a directory whose swap was interrupted (the process died
    after moving it aside and before renaming the new one in); True if it did."""
    target = Path(target)
    old = _siblings(target, _OLD)
    if target.exists() or not old:
        return False
    os.rename(old[-1], target)
    fsync_path(target.parent)
    return True


@contextmanager
def atomic_directory(target: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary directory beside `target`; fill it inside the block. On a
    clean exit its files are synced and given normal modes, and it replaces `target`
    (swap: old moved aside, new renamed in, old removed; the old one is put back if the
    rename fails). On an error the temporary directory is removed and `target` is as it
    was. Leftovers of killed writers (temporary and moved-aside copies) are cleared first."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_directory(target)
    for stale in _siblings(target, _TMP) + _siblings(target, _OLD):
        _remove(stale)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}{_TMP}", dir=target.parent))
    try:
        yield tmp
        for f in tmp.rglob("*"):
            os.chmod(f, DIR_MODE if f.is_dir() else FILE_MODE)
            if f.is_file():
                fsync_path(f)
        os.chmod(tmp, DIR_MODE)
        fsync_path(tmp)
        _swap_in(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(new: Path, target: Path) -> None:
    """Replace `target` by `new`: old aside, new in, old removed; old restored on failure."""
    old = None
    if target.exists():
        old = target.parent / f".{target.name}{_OLD}{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    fsync_path(target.parent)
    if old is not None:
        shutil.rmtree(old)
