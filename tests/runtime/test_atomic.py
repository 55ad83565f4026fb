"""The one atomic writer: files and directories appear whole or not at all, with normal
modes, and an interrupted directory swap leaves one valid copy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from esopt.runtime import atomic
from esopt.runtime.atomic import (
    DIR_MODE,
    FILE_MODE,
    atomic_directory,
    recover_directory,
    write_json_atomic,
    write_parquet_atomic,
)


def _write_dir(target, text: str) -> None:
    with atomic_directory(target) as tmp:
        (tmp / "weights").write_text(text)
        (tmp / "sub").mkdir()
        (tmp / "sub" / "f").write_text(text)


def test_files_get_normal_modes_and_no_temporary_is_left(tmp_path):
    path = write_parquet_atomic(pa.table({"x": [1, 2]}), tmp_path / "a" / "t.parquet",
                                {"config": "{}"})
    assert pq.read_table(path).column("x").to_pylist() == [1, 2]
    assert pq.read_schema(path).metadata[b"config"] == b"{}"
    write_json_atomic(tmp_path / "a" / "r.json", {"b": 1, "a": 2})
    assert (tmp_path / "a" / "r.json").read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'
    assert {p.name for p in (tmp_path / "a").iterdir()} == {"t.parquet", "r.json"}
    assert (path.stat().st_mode & 0o777) == FILE_MODE
    _write_dir(tmp_path / "ckpt", "one")
    assert ((tmp_path / "ckpt").stat().st_mode & 0o777) == DIR_MODE
    assert ((tmp_path / "ckpt" / "sub").stat().st_mode & 0o777) == DIR_MODE
    assert ((tmp_path / "ckpt" / "weights").stat().st_mode & 0o777) == FILE_MODE


def test_a_failed_write_leaves_the_old_file(tmp_path):
    write_json_atomic(tmp_path / "r.json", {"v": 1})

    class Unserialisable:
        pass

    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "r.json", {"v": Unserialisable()})
    assert (tmp_path / "r.json").read_text() == '{\n  "v": 1\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_swap_that_fails_between_its_renames_puts_the_old_copy_back(tmp_path, monkeypatch):
    target = tmp_path / "ckpt"
    _write_dir(target, "old")
    real_rename, calls = os.rename, []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # old moved aside; now the new one would be renamed in
            raise OSError("disk gone")
        return real_rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", rename)
    with pytest.raises(OSError, match="disk gone"):
        _write_dir(target, "new")
    monkeypatch.setattr(atomic.os, "rename", real_rename)
    assert (target / "weights").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # no temporary left


def test_a_process_killed_mid_swap_leaves_a_copy_that_the_next_access_restores(tmp_path):
    """kill -9 after the old copy was moved aside and before the new one was renamed in:
    the old copy is beside the target; reading the checkpoint (or the next write) puts it
    back, and the killed writer's temporary copy is removed."""
    target = tmp_path / "ckpt"
    _write_dir(target, "old")
    script = textwrap.dedent(f"""
        import os, signal
        from esopt.runtime import atomic
        real, n = os.rename, []
        def rename(src, dst):
            n.append(1)
            if len(n) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(src, dst)
        atomic.os.rename = rename
        with atomic.atomic_directory({str(target)!r}) as tmp:
            (tmp / "weights").write_text("new")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert not target.exists()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert any(".old-" in n for n in left) and any(".tmp-" in n for n in left), left
    assert recover_directory(target)
    assert (target / "weights").read_text() == "old"
    _write_dir(target, "newer")  # the next write clears the killed writer's temporary
    assert (target / "weights").read_text() == "newer"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_checkpoint_reads_restore_an_interrupted_swap(tiny_dir, tmp_path):
    from esopt.runtime.checkpoint import read_manifest, read_master, write_checkpoint

    target = tmp_path / "ckpt"
    manifest = write_checkpoint(target, read_master(tiny_dir), files_from=tiny_dir)
    os.rename(target, tmp_path / ".ckpt.old-12345678")  # what a kill mid-swap leaves
    assert read_manifest(target)["sha256"] == manifest["sha256"]
