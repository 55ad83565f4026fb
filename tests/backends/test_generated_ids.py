"""generate returns the token ids the policy sampled and why it stopped, on both HF
decoders; top_k 0 reaches transformers' generate as off (not its default of 50)."""

from dataclasses import replace

import pytest
import torch

from esopt.backends.hf import HFPolicy
from esopt.backends.vllm import vllm_finish_reason, vllm_sampling_kwargs
from esopt.chat import SamplingParams

CONV = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(params=["loop", "generate"])
def policy(request, tiny_dir):
    return HFPolicy.load(tiny_dir, decoder=request.param)


def test_ids_and_finish_reasons(policy):
    tok = policy.tokenizer
    sampling = SamplingParams(max_new_tokens=24, temperature=1.0, seed=1)
    free = policy.generate([CONV], sampling)[0]
    # Length: exactly max_new_tokens ids, no EOS appended, the text is their decoding.
    assert free.finish_reason == "length" and not free.stopped
    assert len(free.token_ids) == free.completion_tokens == 24
    assert tok.eos_token_id not in free.token_ids
    assert tok.decode(list(free.token_ids), skip_special_tokens=True) == free.text
    # Stop string: the ids run up to the token that completed the string (text is cut).
    stop = free.text[8:11]
    cut = policy.generate([CONV], replace(sampling, stop=(stop,)))[0]
    assert cut.finish_reason == "stop" and cut.stopped
    assert cut.token_ids == free.token_ids[:len(cut.token_ids)]  # the same samples
    assert tok.eos_token_id not in cut.token_ids
    assert stop in tok.decode(list(cut.token_ids), skip_special_tokens=True)
    assert stop not in tok.decode(list(cut.token_ids[:-1]), skip_special_tokens=True)
    assert cut.text == free.text[: free.text.find(stop)]


def test_eos_is_the_last_id_when_the_model_ends_its_turn(tiny_dir):
    policy = HFPolicy.load(tiny_dir)
    tok = policy.tokenizer
    first = policy.generate([CONV], SamplingParams(max_new_tokens=1))[0].token_ids[0]
    tok.eos_token = tok.convert_ids_to_tokens(first)  # the greedy first token ends the turn
    assert tok.eos_token_id == first
    for decoder in ("loop", "generate"):
        policy.decoder = decoder
        out = policy.generate([CONV], SamplingParams(max_new_tokens=8))[0]
        assert out.finish_reason == "eos" and out.token_ids == (first,), (decoder, out)
        assert out.completion_tokens == 1 and out.stopped


def test_top_k_zero_reaches_generate_as_off(tiny_dir):
    """With top_k 0 every token of the vocabulary can be drawn: on the random tiny model
    (near-uniform next-token distributions over 49k tokens) the samples' ranks reach far
    beyond transformers' default top_k of 50; with top_k 20 they never pass 20."""
    policy = HFPolicy.load(tiny_dir, decoder="generate")

    def max_rank(top_k):
        sampling = SamplingParams(max_new_tokens=12, temperature=1.0, top_k=top_k, seed=4)
        prompt = policy.tokenizer(policy.render(CONV), add_special_tokens=False)["input_ids"]
        ranks = []
        for c in policy.generate([CONV] * 4, sampling):
            ids = torch.tensor([prompt + list(c.token_ids)])
            with torch.no_grad():
                logits = policy.model(input_ids=ids).logits[0, len(prompt) - 1:-1]
            chosen = logits.gather(-1, ids[0, len(prompt):, None])
            ranks += (logits > chosen).sum(-1).tolist()
        return max(ranks)

    assert max_rank(20) < 20
    assert max_rank(0) > 50


def test_vllm_gets_top_k_off_and_row_seeds():
    off = vllm_sampling_kwargs(SamplingParams(temperature=1.0, seed=5), row=2)
    assert off["top_k"] == -1 and off["seed"] == 7 and off["stop"] is None
    on = vllm_sampling_kwargs(SamplingParams(top_k=20, stop=("\n",)), row=0)
    assert on["top_k"] == 20 and on["stop"] == ["\n"]
    assert vllm_finish_reason("stop", None) == "eos"  # EOS
    assert vllm_finish_reason("stop", 151645) == "eos"  # a stop token id (<|im_end|>)
    assert vllm_finish_reason("stop", "\n") == "stop"  # a stop string
    assert vllm_finish_reason("length", None) == "length"
