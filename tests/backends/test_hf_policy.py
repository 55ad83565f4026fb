"""The HF policy on tiny random models: perturb, restore, update, save, generate. The
noise, update and checkpoint tests run on both architectures (tiny_arch_*): a Llama and a
Qwen2 (q/k/v biases, 7:1 grouped-query attention, untied lm_head)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from esopt.backends.hf import HFPolicy
from esopt.chat import SamplingParams
from esopt.es.noise import tensor_noise
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, Direction, ESConfig
from esopt.runtime.checkpoint import file_sha256, verify_checkpoint


def serving_state(policy):
    return {n: p.detach().clone() for n, p in policy.model.named_parameters()}


def make_update(g=4, seed=0, alpha=5e-4, rewards=None):
    es = ES(ESConfig(population_size=g, alpha=alpha, run_seed=seed,
                     sigma=SigmaSchedule("constant", 1e-3, 1e-3, 3)))
    rewards = np.arange(g, dtype=float) ** 2 if rewards is None else rewards
    update, _ = es.tell(es.init(), rewards)
    return es, update


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "bfloat16-weights"])
def test_restore_is_bit_exact_after_many_cycles(tiny_arch_dir, dtype):
    policy = HFPolicy.load(tiny_arch_dir, serving_dtype=dtype)
    before = serving_state(policy)
    es = ES(ESConfig(population_size=16, sigma=SigmaSchedule("constant", 3e-3, 3e-3, 1)))
    for d in es.ask(es.init()) * 3:  # 48 perturb/restore cycles
        with policy.perturbed(d):
            changed = any(not torch.equal(p, before[n])
                          for n, p in policy.model.named_parameters())
            assert changed
    after = serving_state(policy)
    for name, t in before.items():
        assert after[name].dtype == t.dtype
        assert torch.equal(after[name], t), name


def test_perturbation_is_master_plus_sigma_noise_in_every_tensor(tiny_arch_policy):
    d = Direction(index=0, seed=1234, sign=-1, sigma=2e-3)
    with tiny_arch_policy.perturbed(d):
        for name, p in tiny_arch_policy.model.named_parameters():
            noise = tensor_noise(1234, name, p.shape)
            # The definition every backend shares: a float32 product, then a float32 sum
            # (never a fused multiply-add, whose rounding depends on the kernel's path).
            assert torch.equal(p.detach(), tiny_arch_policy.master[name] + noise * -2e-3), name
            ref = tiny_arch_policy.master[name].double() - 2e-3 * noise.double()
            # float32 rounding of sigma, of the product and of the sum: half an ulp each.
            ulp = 2 * torch.finfo(torch.float32).eps * (
                tiny_arch_policy.master[name].double().abs() + 2e-3 * noise.double().abs())
            assert ((p.detach().double() - ref).abs() <= ulp).all(), name


def test_tied_embeddings_are_perturbed_once(tiny_policy):
    model = tiny_policy.model
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert "lm_head.weight" not in tiny_policy.parameter_names
    name = "model.embed_tokens.weight"
    d = Direction(0, 99, 1, 1e-2)
    with tiny_policy.perturbed(d):
        delta = model.lm_head.weight.detach() - tiny_policy.master[name]
    once = 1e-2 * tensor_noise(99, name, delta.shape)
    torch.testing.assert_close(delta, once, rtol=0, atol=1e-7)


def test_an_untied_head_and_the_qkv_biases_get_their_own_noise(tiny_qwen2_dir):
    policy = HFPolicy.load(tiny_qwen2_dir)
    model = policy.model
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    names = set(policy.parameter_names)
    assert {"lm_head.weight", "model.layers.1.self_attn.k_proj.bias"} <= names
    d = Direction(0, 99, 1, 1e-2)
    with policy.perturbed(d):
        for name in ("lm_head.weight", "model.embed_tokens.weight",
                     "model.layers.1.self_attn.q_proj.bias", "model.layers.1.self_attn.k_proj.bias",
                     "model.layers.1.self_attn.v_proj.bias"):
            p = dict(model.named_parameters())[name]
            delta = p.detach() - policy.master[name]
            torch.testing.assert_close(delta, 1e-2 * tensor_noise(99, name, p.shape),
                                       rtol=0, atol=1e-6)


def test_nested_perturbation_and_apply_while_perturbed_are_errors(tiny_policy):
    _, update = make_update()
    d = Direction(0, 1, 1, 1e-3)
    with tiny_policy.perturbed(d):
        with pytest.raises(RuntimeError, match="perturbed"):
            tiny_policy.apply(update)
        with pytest.raises(RuntimeError, match="perturbed"):
            with tiny_policy.perturbed(d):
                pass
    tiny_policy.apply(update)  # fine once restored


def test_restore_happens_even_if_the_block_raises(tiny_policy):
    before = serving_state(tiny_policy)
    with pytest.raises(KeyError):
        with tiny_policy.perturbed(Direction(0, 5, 1, 1e-2)):
            raise KeyError("boom")
    for n, p in tiny_policy.model.named_parameters():
        assert torch.equal(p, before[n])


def test_combined_serves_master_plus_each_terms_noise_and_restores_exactly(tiny_policy):
    master = {n: t.clone() for n, t in tiny_policy.master.items()}
    before = serving_state(tiny_policy)
    # One term is the perturbation itself, bit for bit.
    d = Direction(index=0, seed=77, sign=-1, sigma=3e-3)
    with tiny_policy.perturbed(d):
        perturbed = serving_state(tiny_policy)
    with tiny_policy.combined([(77, -3e-3)]):
        assert all(torch.equal(p, perturbed[n]) for n, p in tiny_policy.model.named_parameters())
    # Two terms: master + a eps_a, then + b eps_b, each float32 step rounded on its own;
    # a zero step is no term at all.
    with tiny_policy.combined([(5, 2e-3), (6, -1e-3), (7, 0.0)]):
        with pytest.raises(RuntimeError, match="already perturbed"):
            with tiny_policy.perturbed(d):
                pass
        for name, p in tiny_policy.model.named_parameters():
            one = master[name] + tensor_noise(5, name, p.shape) * 2e-3
            assert torch.equal(p.detach(), one + tensor_noise(6, name, p.shape) * -1e-3), name
    with pytest.raises(KeyError):
        with tiny_policy.combined([(5, 1e-2)]):
            raise KeyError("boom")
    for name, p in tiny_policy.model.named_parameters():
        assert torch.equal(p, before[name]), name
        assert torch.equal(tiny_policy.master[name], master[name]), name


def test_combined_in_bf16_serving_rounds_the_float32_sum_once(tiny_dir):
    policy = HFPolicy.load(tiny_dir, serving_dtype="bfloat16")
    with policy.combined([(5, 2e-3), (6, 1e-3)]):
        for name, p in policy.model.named_parameters():
            shape = p.shape
            ref = (policy.master[name] + tensor_noise(5, name, shape) * 2e-3
                   + tensor_noise(6, name, shape) * 1e-3)
            assert p.dtype == torch.bfloat16 and torch.equal(p, ref.to(torch.bfloat16)), name
    for name, p in policy.model.named_parameters():
        assert torch.equal(p, policy.master[name].to(torch.bfloat16)), name


def test_update_matches_a_float64_reference(tiny_arch_policy):
    es, update = make_update(g=6, alpha=5e-4)
    before = {n: t.clone() for n, t in tiny_arch_policy.master.items()}
    tiny_arch_policy.apply(update)
    for name, old in before.items():
        ref = torch.zeros(old.shape, dtype=torch.float64)
        for seed, sign, w in zip(update.seeds, update.signs, update.weights, strict=True):
            ref += w * sign * tensor_noise(seed, name, old.shape).double()
        ref *= update.alpha / len(update.seeds)
        delta = tiny_arch_policy.master[name].double() - old.double()
        # float32 rounding: one ulp of the weight plus the float32 accumulation of the sum.
        tol = 2 * torch.finfo(torch.float32).eps * (old.double().abs() + ref.abs()) + 1e-10
        assert ((delta - ref).abs() <= tol).all(), name
        assert ref.abs().max() > 1e-6  # the update is not trivially zero
    for n, p in tiny_arch_policy.model.named_parameters():
        assert torch.equal(p.detach(), tiny_arch_policy.master[n])


def test_bf16_serving_keeps_the_full_float32_update(tiny_arch_dir):
    fp32 = HFPolicy.load(tiny_arch_dir)
    bf16 = HFPolicy.load(tiny_arch_dir, serving_dtype="bfloat16")
    _, update = make_update(g=4, alpha=5e-5)  # a step far below one bf16 ulp of the weights
    before = {n: t.clone() for n, t in bf16.master.items()}
    fp32.apply(update)
    bf16.apply(update)
    changed = 0
    total = 0
    for name, old in before.items():
        assert torch.equal(bf16.master[name], fp32.master[name]), name
        changed += (bf16.master[name] != old).sum().item()
        total += old.numel()
    assert changed / total > 0.99  # the update lives in the master, not rounded away
    for n, p in bf16.model.named_parameters():
        assert p.dtype == torch.bfloat16
        assert torch.equal(p.detach(), bf16.master[n].to(torch.bfloat16))


def test_zero_update_leaves_weights_alone(tiny_policy):
    _, update = make_update(rewards=np.ones(4))
    before = {n: t.clone() for n, t in tiny_policy.master.items()}
    tiny_policy.apply(update)
    assert all(torch.equal(before[n], t) for n, t in tiny_policy.master.items())


def test_same_seeds_and_rewards_give_the_same_checkpoint_sha(tiny_arch_dir, tmp_path):
    shas = []
    for run in range(2):
        policy = HFPolicy.load(tiny_arch_dir)
        _, update = make_update(g=4, seed=7)
        policy.apply(update)
        manifest = policy.save(tmp_path / f"run{run}", {"generation": 1})
        shas.append(manifest["sha256"])
        assert verify_checkpoint(tmp_path / f"run{run}")["generation"] == 1
    assert shas[0] == shas[1]
    _, other = make_update(g=4, seed=8)
    policy.apply(other)
    assert policy.save(tmp_path / "other")["sha256"] != shas[0]


def test_save_load_roundtrip_keeps_the_float32_master(tiny_arch_dir, tmp_path):
    policy = HFPolicy.load(tiny_arch_dir, serving_dtype="bfloat16")
    _, update = make_update()
    policy.apply(update)
    manifest = policy.save(tmp_path / "ckpt")
    assert file_sha256(tmp_path / "ckpt" / "model.safetensors") == manifest["sha256"]
    loaded = HFPolicy.load(tmp_path / "ckpt")
    for name, t in policy.master.items():
        assert torch.equal(loaded.master[name], t), name


def test_load_rejects_a_directory_that_is_not_a_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        HFPolicy.load(tmp_path)
    with pytest.raises(ValueError, match="serving_dtype"):
        HFPolicy.load(tmp_path / "x", serving_dtype="int8")


CONVS = [
    [{"role": "user", "content": "Say hello."}],
    [{"role": "user", "content": "What is 12 times 12? Think step by step and then answer."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a color."}],
    [{"role": "user", "content": "Solve it."}, {"role": "assistant", "content": "<answer>"}],
]


def test_batched_greedy_generation_equals_one_at_a_time(tiny_policy):
    sampling = SamplingParams(max_new_tokens=12)
    batched = tiny_policy.generate(CONVS, sampling)
    single = [tiny_policy.generate([c], sampling)[0] for c in CONVS]
    assert [c.text for c in batched] == [c.text for c in single]
    assert [c.completion_tokens for c in batched] == [c.completion_tokens for c in single]
    assert all(c.completion_tokens <= 12 for c in batched)
    prompt_lens = [c.prompt_tokens for c in batched]
    assert len(set(prompt_lens)) > 1  # the batch really was padded


def test_sampling_is_seeded(tiny_policy):
    s = SamplingParams(max_new_tokens=10, temperature=0.7, top_p=0.8, top_k=20, seed=3)
    a = [c.text for c in tiny_policy.generate(CONVS, s)]
    b = [c.text for c in tiny_policy.generate(CONVS, s)]
    assert a == b


def test_stop_strings_cut_the_text(tiny_policy):
    # Seeded sampling gives varied text; the same seed replays it up to the stop string.
    sampling = SamplingParams(max_new_tokens=24, temperature=1.0, seed=1)
    free = tiny_policy.generate(CONVS[:1], sampling)[0]
    assert free.finish_reason == "length" and len(free.text) > 12
    stop = free.text[8:11]
    cut = tiny_policy.generate(CONVS[:1], replace(sampling, stop=(stop,)))[0]
    assert cut.finish_reason == "stop"
    assert cut.text == free.text[: free.text.find(stop)]


def test_prefilled_assistant_turn_is_continued(tiny_policy):
    text = tiny_policy.render(CONVS[3])
    assert text.endswith("<answer>")
    assert not tiny_policy.render(CONVS[0]).endswith("<|im_end|>\n")


@pytest.mark.parametrize("kwargs", [dict(max_new_tokens=0), dict(temperature=-1),
                                    dict(top_p=0), dict(top_k=-1), dict(stop=("",))])
def test_bad_sampling_params(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


def test_hub_loading_code_works_on_a_local_model(tiny_dir, tmp_path):
    # The Hub path of real users, exercised without network: from_pretrained on a
    # local directory goes through the same code.
    from esopt.models import fetch_hub_model

    out = fetch_hub_model(str(tiny_dir), tmp_path / "hub")
    assert verify_checkpoint(out)["source"] == "huggingface-hub"
    policy = HFPolicy.load(out)
    reference = HFPolicy.load(tiny_dir)
    for name, t in reference.master.items():
        assert torch.equal(policy.master[name], t)
