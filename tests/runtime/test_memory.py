"""A job's peak memory: its own process plus its engine workers, never the device's memory
in use by every process (issue 36, item 8). No GPU here: the combination is a pure
function of the readings, tested as such; the hf reading with a stand-in torch."""

import os
import sys
from types import SimpleNamespace

from esopt.runtime import memory
from esopt.runtime.memory import EngineMemory, combined_peak_bytes

GIB = 2**30


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


def test_other_processes_on_the_device_are_not_counted(monkeypatch):
    """60 GB in use on the device (an evaluation of another method, vLLM's reservation of
    another job): this job's peak is its own 9 GB. The old reading took total - free."""
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace())
    monkeypatch.setitem(sys.modules, "torch", fake_torch(True, 9000.0, 60_000.0))
    assert memory.peak_memory_mb() == 9000.0


def test_engine_workers_in_other_processes_add_their_own_memory():
    me = os.getpid()
    # A vLLM driver that never touched CUDA (0) and one worker: its allocator peak
    # (weights 8 + KV 60 + activations 2 GiB) is what the job holds.
    worker = EngineMemory(pid=me + 1, peak_bytes=70 * GIB, weights_bytes=8 * GIB,
                          kv_cache_bytes=60 * GIB)
    assert combined_peak_bytes(0, me, [worker]) == 70 * GIB
    # A driver holding 3 GiB of its own (noise, an HF model) adds to it.
    assert combined_peak_bytes(3 * GIB, me, [worker]) == 73 * GIB
    # A worker whose allocator does not see its KV pool still holds weights + KV.
    pooled = EngineMemory(pid=me + 1, peak_bytes=9 * GIB, weights_bytes=8 * GIB,
                          kv_cache_bytes=60 * GIB)
    assert combined_peak_bytes(0, me, [pooled]) == 68 * GIB
    # Tensor parallel: two workers, two processes, both count; a process counts once.
    other = EngineMemory(pid=me + 2, peak_bytes=40 * GIB, weights_bytes=4 * GIB,
                         kv_cache_bytes=30 * GIB)
    assert combined_peak_bytes(0, me, [worker, other, worker]) == 110 * GIB


def test_an_engine_in_this_process_is_inside_its_peak():
    """VLLM_ENABLE_V1_MULTIPROCESSING=0: the worker's tensors are this process's."""
    me = os.getpid()
    inside = EngineMemory(pid=me, peak_bytes=70 * GIB, weights_bytes=8 * GIB,
                          kv_cache_bytes=60 * GIB)
    assert combined_peak_bytes(70 * GIB, me, [inside]) == 70 * GIB
    assert combined_peak_bytes(10 * GIB, me, [inside]) == 70 * GIB  # at least its own


def test_a_policy_without_an_engine_is_this_process(tiny_policy):
    assert not hasattr(tiny_policy, "engine_memory")
    assert memory.peak_memory_mb(tiny_policy) == memory.peak_memory_mb()
