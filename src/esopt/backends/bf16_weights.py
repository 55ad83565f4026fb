"""bfloat16 weights, float32 activations: serving_dtype "bfloat16-weights" (HF backend).

Why this exists beside plain bfloat16: on a CPU with AVX512-BF16 a one-token decode step
is bound by reading the weights (about 8 GB/s on one core here), and a bf16 matmul reads
half the bytes and runs at ~2x the float32 GFLOP/s. A whole-bf16 model throws that away in
its other ops (bf16 attention is 2-6x slower than float32's on this CPU); keeping the
activations, norms and attention in float32 and only the matrices in bf16 keeps the gain.
Measured on SmolLM2-135M, one core, one tiny-scale Sudoku generation (8 directions x 4
boards; `benchmarks/es_generation.py`, path bf16-weights; README, Benchmarks): 29.1 s
against 41.5 s served in float32 and 38.6 s in whole-model bfloat16.

What changes: every nn.Linear (weight and bias) and every nn.Embedding is stored in
bfloat16. A Linear casts its input to bfloat16 and its output back to float32 (oneDNN
accumulates in float32 but returns bf16: CPU torch has no bf16 x bf16 -> float32 matmul, so
a matmul's input and output are rounded); an Embedding's output is cast to float32. The
residual stream, RMSNorm, RoPE, attention and the sampler's logits stay float32.
ES is unchanged: the float32 master is perturbed in float32 and rounded into the bf16
serving tensors (HFPolicy's generic serving path), so only the served numerics differ
from float32 serving.
"""

from __future__ import annotations

import torch
from torch import nn


def _cast_input(module: nn.Module, args: tuple) -> tuple:
    return (args[0].to(module.weight.dtype), *args[1:])


def _to_float32(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
    return output.to(torch.float32)


def activation_dtype(module: nn.Module) -> torch.dtype:
    """The dtype a Linear's or an Embedding's output is returned in: float32 where this
    module serves it, else its weight's (what a forward hook adding to the output needs)."""
    return getattr(module, "_esopt_activation_dtype", module.weight.dtype)


def serve_bf16_weights(model: nn.Module) -> nn.Module:
    """Store the model's matrices in bfloat16 and compute around them in float32 (in place;
    parameter names are unchanged, so the master and the noise keys still match)."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.to(torch.bfloat16)
            if isinstance(module, nn.Linear):
                module.register_forward_pre_hook(_cast_input)
            module.register_forward_hook(_to_float32)
            module._esopt_activation_dtype = torch.float32
    return model
