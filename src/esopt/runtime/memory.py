"""Process memory readings for benchmarks and the resource ledger.

A job's peak memory is its own, not the device's: this process's allocator peak (CUDA
torch.cuda.max_memory_reserved; on a CPU the peak RSS) plus, when the policy is served by
an engine whose workers run in other processes (vLLM), each worker process's own peak,
at least the weights and KV cache the engine holds there (its accounting). Memory in use
by other processes on the device (another method's evaluation, another job) is never
read: "total - free" would count them.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Sequence
from dataclasses import dataclass


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MiB.

    Reads VmHWM: getrusage's ru_maxrss survives execve on Linux, so a child started by a
    big parent would report the parent's peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True)
class EngineMemory:
    """One inference-engine worker's own memory (vLLM: esopt.backends.vllm.ESWorker's
    es_memory, per worker process)."""

    pid: int
    peak_bytes: int
    """The worker process's allocator peak (CUDA max_memory_reserved; CPU: peak RSS)."""
    weights_bytes: int
    """The served weights (every parameter and buffer of the engine's model)."""
    kv_cache_bytes: int
    """The KV cache the engine allocated (vLLM reserves it up front)."""


def combined_peak_bytes(own_peak: int, own_pid: int, engines: Sequence[EngineMemory]) -> int:
    """This process's peak plus each engine worker process's, once per process: a
    worker holds at least its weights + KV cache (allocated whatever its allocator
    reports, e.g. from a pool the caching allocator does not see); a worker living in this
    very process (vLLM without multiprocessing) is inside `own_peak` already."""
    own, others, seen = own_peak, 0, set()
    for e in engines:
        if e.pid in seen:
            continue
        seen.add(e.pid)
        held = max(e.peak_bytes, e.weights_bytes + e.kv_cache_bytes)
        if e.pid == own_pid:
            own = max(own, held)
        else:
            others += held
    return own + others


def own_peak_bytes() -> int:
    """This process's peak: the CUDA caching allocator's peak reservation when it serves
    on a GPU (what it holds from the device, not only live tensors), else the peak RSS."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        reserved = int(torch.cuda.max_memory_reserved())
        if reserved > 0:
            return reserved
    return int(peak_rss_mb() * 2**20)


def peak_memory_mb(policy=None) -> float:
    """The ledger's peak memory of this job, in MiB: this process's peak (own_peak_bytes)
    plus the worker processes of `policy`'s engine, when it has one (`engine_memory()`:
    the vLLM backend), combined by combined_peak_bytes. Never the device's memory in use,
    which counts every process on it."""
    engines = policy.engine_memory() if hasattr(policy, "engine_memory") else []
    return combined_peak_bytes(own_peak_bytes(), os.getpid(), engines) / 2**20


# bytes of a served weight; "bfloat16-weights" (HF: bf16 matrices, float32 norms and
# activations) counts its matrices only: norms are a few thousand parameters.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "bfloat16-weights": 2}


def state_bytes_per_parameter(trains: bool, serving_dtype: str) -> int:
    """Bytes per policy parameter a method keeps on the device, weights and optimiser
    state only (no activations, KV cache or workspace): the "GPU memory requirement" kind
    of number the paper's Table 1 reports, for this implementation. PPO's critic comes on
    top (critic_parameters x CRITIC_BYTES_PER_PARAMETER; training_state_bytes).

    Inference and ES: the serving weights (the float32 ES master lives in host memory).
    The RL baselines (esopt.baselines): the serving weights, the frozen reference copy, and
    for AdamW float32 parameters, gradients and two moments; when serving in lower
    precision the float32 parameters are a master beside the serving weights, whose own
    gradients exist until they are moved into the master's."""
    w = DTYPE_BYTES[serving_dtype]
    if not trains:
        return w
    if w == 4:
        return 4 + 4 + 4 + 8  # weights (= trained), reference, gradients, AdamW m and v
    return w + w + w + 4 + 4 + 8  # serving, reference, its gradients, master, grads, m, v


# PPO's critic (esopt.baselines.ppo.Critic) trains in float32 and is never served: weights,
# gradients and AdamW's two moments (what mixed-precision AdamW keeps too: 2 + 2 + 12).
CRITIC_BYTES_PER_PARAMETER = 4 + 4 + 8


def critic_parameters(num_parameters: int, config: dict) -> int:
    """Parameters of the PPO critic built from a model with `num_parameters` and HF
    `config` (its config.json): the model without an untied LM head, plus a scalar value
    head (hidden_size weights, no bias, as transformers' ForSequenceClassification)."""
    text = config.get("text_config", config)  # multimodal configs nest the language model
    d = int(text["hidden_size"])
    tied = config.get("tie_word_embeddings", text.get("tie_word_embeddings", True))
    lm_head = 0 if tied else int(text["vocab_size"]) * d
    return num_parameters - lm_head + d


def training_state_bytes(num_parameters: int, trains: bool, serving_dtype: str,
                         critic: int = 0) -> int:
    """Device bytes of weights and optimiser state of a method on a model of
    `num_parameters`, with a critic of `critic` parameters (PPO; 0: none)."""
    return (num_parameters * state_bytes_per_parameter(trains, serving_dtype)
            + critic * CRITIC_BYTES_PER_PARAMETER)
