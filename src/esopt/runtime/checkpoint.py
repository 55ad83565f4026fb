"""Checkpoint directories: float32 safetensors weights + HF config/tokenizer + manifest.json.

A checkpoint directory loads with `transformers.AutoModelForCausalLM.from_pretrained`, and
its manifest carries the sha256 of the weights file, so that a run's lineage (parent
sha256, seeds, shaped rewards) can be checked and replayed from files alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import save_file

from esopt.es.noise import NOISE_SPEC
from esopt.runtime.atomic import atomic_directory, recover_directory

WEIGHTS_NAME = "model.safetensors"
MANIFEST_NAME = "manifest.json"


def file_sha256(path: str | os.PathLike, bufsize: int = 1 << 22) -> str:
    """sha256 hex digest of a file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def write_checkpoint(
    out_dir: str | os.PathLike,
    tensors: Mapping[str, torch.Tensor],
    *,
    config=None,
    tokenizer=None,
    generation_config=None,
    manifest: Mapping | None = None,
    files_from: str | os.PathLike | None = None,
) -> dict:
    """Write a checkpoint directory atomically and return its manifest.

    The model's other files come from `config`/`tokenizer`/`generation_config` objects, or
    are copied from the checkpoint directory `files_from` (an update of a checkpoint's
    weights, made without building the model). The directory appears complete or not at
    all (esopt.runtime.atomic.atomic_directory): it is written beside the target and
    swapped in, so a crash never leaves a half-written checkpoint or none at all.
    """
    if (config is None) == (files_from is None):
        raise ValueError("write_checkpoint: give exactly one of config and files_from")
    with atomic_directory(out_dir) as tmp:
        weights = {n: t.detach().to("cpu", torch.float32).contiguous() for n, t in tensors.items()}
        save_file(weights, str(tmp / WEIGHTS_NAME), metadata={"format": "pt"})
        if files_from is not None:
            own = {WEIGHTS_NAME, f"{WEIGHTS_NAME}.sha256", MANIFEST_NAME}
            for f in Path(files_from).iterdir():
                if f.is_file() and f.name not in own:
                    shutil.copy2(f, tmp / f.name)
        else:
            config = config.__class__.from_dict(config.to_dict())  # a copy we can edit
            config.dtype = "float32"  # the file holds the float32 master weights
            config.save_pretrained(tmp)
            if generation_config is not None:
                generation_config.save_pretrained(tmp)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
        sha = file_sha256(tmp / WEIGHTS_NAME)
        (tmp / f"{WEIGHTS_NAME}.sha256").write_text(f"{sha}  {WEIGHTS_NAME}\n")
        # What the writer measured wins over what the caller passed.
        full = {**(manifest or {}), "sha256": sha,
                "num_parameters": sum(t.numel() for t in weights.values()),
                "noise_spec": NOISE_SPEC}
        (tmp / MANIFEST_NAME).write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    return full


def read_master(ckpt_dir: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The float32 master weights of an esopt checkpoint (what write_checkpoint wrote:
    exactly the parameters ES perturbs), checked against the manifest's sha256."""
    from safetensors.torch import load_file

    verify_checkpoint(ckpt_dir)
    tensors = load_file(str(Path(ckpt_dir) / WEIGHTS_NAME))
    wrong = [n for n, t in tensors.items() if t.dtype != torch.float32]
    if wrong:
        raise ValueError(f"{ckpt_dir}: not float32 master weights ({wrong[0]} is "
                         f"{tensors[wrong[0]].dtype})")
    return tensors


def read_manifest(ckpt_dir: str | os.PathLike) -> dict:
    """The manifest of a checkpoint directory; FileNotFoundError if it has none (not an
    esopt checkpoint), ValueError naming the file if it is truncated or not JSON."""
    recover_directory(ckpt_dir)  # a swap interrupted by a kill left the old copy aside
    path = Path(ckpt_dir) / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no {MANIFEST_NAME} in {ckpt_dir}: not an esopt checkpoint")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: truncated or not JSON ({e})") from None
    if not isinstance(manifest, dict) or "sha256" not in manifest:
        raise ValueError(f"{path}: not a checkpoint manifest (no sha256)")
    return manifest


def verify_checkpoint(ckpt_dir: str | os.PathLike) -> dict:
    """Recompute the weights' sha256 and compare it with the manifest; return the manifest.
    A mismatch (a corrupted or replaced weights file) is an error naming the file."""
    manifest = read_manifest(ckpt_dir)
    weights = Path(ckpt_dir) / WEIGHTS_NAME
    if not weights.is_file():
        raise FileNotFoundError(f"{ckpt_dir}: the manifest names weights, but there is no "
                                f"{WEIGHTS_NAME}")
    actual = file_sha256(weights)
    if actual != manifest["sha256"]:
        raise ValueError(f"{weights}: sha256 {actual} differs from its manifest's "
                         f"{manifest['sha256']}: the weights are corrupted or were replaced; "
                         "refusing to use them")
    return manifest


def check_noise_lineage(ckpt_dir: str | os.PathLike) -> None:
    """Refuse to continue an ES lineage drawn under another noise spec.

    A checkpoint that an ES update made (its manifest has seeds) was reached with the noise
    of the spec it records; continuing it with today's generator would mix two noise
    definitions in one run, and replaying it would give other weights. Old specs are not
    kept (spec 1 drew torch.randn, whose bits depend on the CPU and torch build): such
    runs are refused, with the way out in the message. Base models and RL checkpoints
    carry no ES lineage and pass."""
    try:
        manifest = read_manifest(ckpt_dir)
    except FileNotFoundError:
        return
    spec = manifest.get("noise_spec", "esopt-noise/1 (torch.randn per 2^20 block)")
    if "seeds" in manifest and spec != NOISE_SPEC:
        raise ValueError(
            f"{ckpt_dir}: made by ES updates under noise spec {spec!r}; this esopt draws "
            f"{NOISE_SPEC!r} and cannot replay or continue it. Rerun the run from its base "
            "model (delete its results directory), or use the esopt version that made it.")


def checkpoint_sha256(ckpt_dir: str | os.PathLike) -> str | None:
    """sha256 of a checkpoint's weights, hashed from the file (streamed): for an esopt
    checkpoint, verified against its manifest (an error on a mismatch); for a plain
    Hugging Face directory, the file's hash; None for sharded weights or a Hub id."""
    try:
        return verify_checkpoint(ckpt_dir)["sha256"]
    except FileNotFoundError:
        weights = Path(ckpt_dir) / WEIGHTS_NAME
        return file_sha256(weights) if weights.is_file() else None
