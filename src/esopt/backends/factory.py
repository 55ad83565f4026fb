"""Build a policy from a checkpoint on the configured backend: the one place that loads models."""

from __future__ import annotations

import time

BACKENDS = ("hf", "vllm")


def load_policy(checkpoint: str, backend: str = "hf", serving_dtype: str = "float32",
                runtime: dict | None = None):
    """(policy, seconds spent verifying, importing and loading): model loading is the DAG's
    hidden tax, so every stage reports it.

    An esopt checkpoint (one with a manifest) is verified first: its weights' sha256 must
    equal the manifest's, so a corrupted copy is refused before anything is scored on it;
    the verified hash is the policy's `checkpoint_sha256` (None for a plain model
    directory or a Hub id). `backend` is vllm (the runtime's `vllm` engine arguments) or hf
    (on the runtime's `device`; auto: cuda when available), in `serving_dtype`."""
    from esopt.runtime.checkpoint import checkpoint_sha256

    t0 = time.perf_counter()
    if backend not in BACKENDS:
        raise ValueError(f"backend: unknown {backend!r}; choose one of {list(BACKENDS)}")
    sha = checkpoint_sha256(checkpoint)
    runtime = runtime or {}
    if backend == "vllm":
        from esopt.backends.vllm import VLLMPolicy

        policy = VLLMPolicy.load(checkpoint, serving_dtype=serving_dtype,
                                 **runtime.get("vllm", {}))
    else:
        import torch

        from esopt.backends.hf import HFPolicy

        device = runtime.get("device", "auto")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        policy = HFPolicy.load(checkpoint, serving_dtype=serving_dtype, device=device)
    policy.checkpoint_sha256 = sha
    return policy, time.perf_counter() - t0
