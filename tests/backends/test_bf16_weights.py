"""serving_dtype "bfloat16-weights": bf16 matrices, float32 activations, float32 master; on
both tiny architectures (the Qwen2's q/k/v biases live in its Linears: bf16 too)."""

import pytest
import torch
from torch import nn

from esopt.backends.hf import HFPolicy
from esopt.chat import SamplingParams
from esopt.es.noise import tensor_noise
from esopt.es.strategy import Direction

CONVS = [[{"role": "user", "content": "Say hello."}],
         [{"role": "user", "content": "What is 12 times 12?"}]]


@pytest.fixture()
def mixed(tiny_arch_dir):
    return HFPolicy.load(tiny_arch_dir, serving_dtype="bfloat16-weights")


def test_only_the_matrices_are_bf16(mixed):
    matrices = {f"{m}.{n}" if m else n for m, mod in mixed.model.named_modules()
                if isinstance(mod, nn.Linear | nn.Embedding)
                for n, _ in mod.named_parameters(recurse=False)}
    assert matrices
    for name, p in mixed.model.named_parameters():
        want = torch.bfloat16 if name in matrices else torch.float32
        assert p.dtype == want, name
    assert any(p.dtype == torch.float32 for p in mixed.model.parameters())  # the norms
    biases = [n for n in matrices if n.endswith(".bias")]
    assert len(biases) == (3 * mixed.config.num_hidden_layers
                           if mixed.config.model_type == "qwen2" else 0)
    assert all(t.dtype == torch.float32 for t in mixed.master.values())


@torch.inference_mode()
def test_activations_are_float32_and_match_a_float32_model_of_the_rounded_weights(
        mixed, tiny_arch_dir):
    ids = torch.tensor([[1, 5, 9, 13, 17, 21, 25, 29]])
    hidden = []
    hook = mixed.model.model.layers[0].register_forward_hook(
        lambda m, a, out: hidden.append(out[0] if isinstance(out, tuple) else out))
    try:
        logits = mixed.model(input_ids=ids).logits
    finally:
        hook.remove()
    assert logits.dtype == torch.float32 and hidden[0].dtype == torch.float32
    # Reference: float32 compute throughout, on the same bf16-rounded matrices.
    ref = HFPolicy.load(tiny_arch_dir)
    for name, p in ref.model.named_parameters():
        p.data.copy_(dict(mixed.model.named_parameters())[name].float())
    want = ref.model(input_ids=ids).logits
    # Only the matmuls' inputs and outputs are rounded to bf16 (CPU torch has no bf16 x bf16
    # -> float32 matmul), the rest of the forward runs in float32.
    err = (logits - want).abs().max().item()
    assert 0 < err < 0.02 * want.abs().max().item()


def test_perturbed_serving_is_the_float32_sum_rounded_once(mixed):
    d = Direction(index=0, seed=77, sign=1, sigma=3e-3)
    with mixed.perturbed(d):
        for name, p in mixed.model.named_parameters():
            ref = mixed.master[name] + tensor_noise(77, name, p.shape) * 3e-3
            assert torch.equal(p.detach(), ref.to(p.dtype)), name
    for name, p in mixed.model.named_parameters():
        assert torch.equal(p.detach(), mixed.master[name].to(p.dtype)), name


def test_generates_with_the_decode_loop(mixed):
    out = mixed.generate(CONVS, SamplingParams(temperature=0.0, max_new_tokens=6, seed=0))
    assert [o.completion_tokens for o in out] == [6, 6]
    again = mixed.generate(CONVS, SamplingParams(temperature=0.0, max_new_tokens=6, seed=0))
    assert [o.token_ids for o in out] == [o.token_ids for o in again]


def test_vllm_refuses_it():
    from esopt.backends.vllm import VLLMPolicy

    with pytest.raises(ValueError, match="bfloat16-weights"):
        VLLMPolicy.load("/nonexistent", serving_dtype="bfloat16-weights")
