"""What the ledger's peak memory reads on a GPU, with a stand-in torch (no GPU here)."""

import sys
from types import SimpleNamespace

from esopt.runtime import memory


def fake_torch(initialized: bool, reserved_mb: float, in_use_mb: float):
    mib = 2**20
    cuda = SimpleNamespace(is_available=lambda: True, is_initialized=lambda: initialized,
                           max_memory_reserved=lambda: reserved_mb * mib,
                           mem_get_info=lambda: ((80_000 - in_use_mb) * mib, 80_000 * mib))
    return SimpleNamespace(cuda=cuda)


def test_hf_on_a_gpu_reads_the_allocators_reservation(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_torch(True, 9000.0, 30_000.0))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    assert memory.peak_memory_mb() == 9000.0


def test_vllm_counts_the_engines_device_memory(monkeypatch):
    """vLLM's engine runs in another process (this one may never touch CUDA): the device's
    memory in use (weights + the KV cache it reserved) is what the backend holds."""
    monkeypatch.setattr(memory, "_DEVICE_PEAK_MB", [0.0])
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace())
    monkeypatch.setitem(sys.modules, "torch", fake_torch(False, 0.0, 60_000.0))
    assert memory.peak_memory_mb() == 60_000.0
    monkeypatch.setitem(sys.modules, "torch", fake_torch(False, 0.0, 50_000.0))
    assert memory.peak_memory_mb() == 60_000.0  # a running peak
