"""Helpers of the companion-method tests: small float32 parameter sets and their hash."""

import hashlib

import torch


def params(seed: int = 0) -> dict[str, torch.Tensor]:
    """A few tensors of odd sizes (one smaller than a CoPES chunk), float32."""
    g = torch.Generator().manual_seed(seed)
    shapes = {"layer.0.w": (37, 29), "layer.1.w": (29, 37), "norm": (29,), "emb": (50, 12)}
    return {n: torch.randn(s, generator=g) * 0.02 for n, s in shapes.items()}


def sha256(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].contiguous().numpy().tobytes())
    return h.hexdigest()
