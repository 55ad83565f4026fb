"""Process memory readings for benchmarks and the resource ledger."""

from __future__ import annotations

import resource
import sys


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


def peak_memory_mb() -> float:
    """The ledger's peak memory, in MiB: what the backend holds on the GPU when this
    process serves on one, else the peak RSS (the paper's Table 1 reports GPU memory).

    GPU: the caching allocator's peak reservation (torch.cuda.max_memory_reserved: what
    the process holds from the device, not only live tensors); with vLLM loaded, also the
    device-wide memory in use, because vLLM's engine runs in other processes and reserves
    its KV cache (gpu_memory_utilization) up front: that is what the backend holds."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return peak_rss_mb()
    peak = torch.cuda.max_memory_reserved() / 2**20 if torch.cuda.is_initialized() else 0.0
    if "vllm" in sys.modules:
        peak = max(peak, _device_in_use_peak_mb(torch))
    return peak if peak > 0 else peak_rss_mb()


_DEVICE_PEAK_MB = [0.0]


def _device_in_use_peak_mb(torch) -> float:
    """Running maximum, over this process's calls, of the memory in use on the current
    device by every process (total - free); the engine's reservation is constant, so a
    reading after the rollouts is its peak."""
    free, total = torch.cuda.mem_get_info()
    _DEVICE_PEAK_MB[0] = max(_DEVICE_PEAK_MB[0], (total - free) / 2**20)
    return _DEVICE_PEAK_MB[0]


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
