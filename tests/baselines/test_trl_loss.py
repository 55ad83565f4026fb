"""GRPO's loss equals TRL's own GRPOTrainer._compute_loss, value and gradient, for every
named `loss_type`, on the same batch, model and reference (single-turn episodes: a TRL
completion is one of our rows)."""

import math

import pytest
import torch

from esopt.baselines.grpo import (
    LOSS_TYPES,
    GRPOConfig,
    GRPOTrainer,
    RLSample,
    build_batch,
    loss_row_weights,
)
from esopt.chat import SamplingParams
from tests.baselines.test_rl_losses import grads_of, perturb_reference

trl = pytest.importorskip("trl")

MAX_COMPLETION = 16
# (prompt ids: all of one length, so TRL's left padding is no padding), completion ids
# of different lengths (right padding), advantages (one zero: its tokens still count).
ROWS = [([5, 17, 33, 40, 8, 90], [11, 12, 13], 1.0),
        ([6, 18, 34, 41, 9, 91], [21, 22, 23, 24, 25], -0.5),
        ([7, 19, 35, 42, 10, 92], [31, 32], 0.0),
        ([5, 17, 36, 43, 11, 93], [41, 42, 43, 44], 0.25)]


@pytest.fixture(scope="module")
def trl_trainer(tiny_dir, tmp_path_factory):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # beta 0 at construction (TRL would load a reference by the model's Hub id); the
    # reference log-probabilities are handed in, and beta set, before each loss. float32
    # (TRL's configs default to bf16 autocast), and the KL term of GRPO (DeepSeekMath's
    # k3), which TRL >= 1.x multiplies by the importance ratio unless told not to.
    args = trl.GRPOConfig(output_dir=str(tmp_path_factory.mktemp("trl")), beta=0.0,
                          epsilon=0.2, per_device_train_batch_size=len(ROWS),
                          num_generations=2, max_completion_length=MAX_COMPLETION,
                          use_cpu=True, bf16=False, use_bias_correction_kl=False,
                          report_to="none", temperature=1.0)
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_dir),
        reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=args,
        train_dataset=Dataset.from_dict({"prompt": ["a", "b"]}),
        processing_class=AutoTokenizer.from_pretrained(tiny_dir))
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop when training
    return trainer


def load_weights(model, source) -> None:
    with torch.no_grad():
        for p, q in zip(model.parameters(), source.parameters(), strict=True):
            p.copy_(q)


def trl_inputs(trainer, reference, pad_id: int) -> dict:
    """TRL's batch layout; the reference scored by TRL's own code (its model holding the
    reference's weights: TRL's trainer patches the model it scores with)."""
    prompt = torch.tensor([p for p, _, _ in ROWS])
    width = max(len(c) for _, c, _ in ROWS)
    completion = torch.tensor([c + [pad_id] * (width - len(c)) for _, c, _ in ROWS])
    mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for _, c, _ in ROWS])
    ids = torch.cat([prompt, completion], dim=1)
    attention = torch.cat([torch.ones_like(prompt), mask], dim=1)
    load_weights(trainer.model, reference)
    with torch.no_grad():
        ref = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention,
                                                         width)[0]
    return {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt),
            "completion_ids": completion, "completion_mask": mask,
            "advantages": torch.tensor([a for _, _, a in ROWS]),
            "ref_per_token_logps": ref, "num_items_in_batch": mask.sum()}


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_grpo_loss_equals_trls(tiny_policy, trl_trainer, loss_type):
    cfg = GRPOConfig(group_size=2, beta=0.1, micro_batch=len(ROWS), loss_type=loss_type,
                     max_completion_length=MAX_COMPLETION,
                     train_decoder=SamplingParams(max_new_tokens=8, temperature=1.0))
    ours = GRPOTrainer(tiny_policy, cfg)
    perturb_reference(ours)  # so that the KL term is not zero
    tok = tiny_policy.tokenizer
    batch = build_batch([RLSample(p, c, a) for p, c, a in ROWS], tok.pad_token_id)
    stats = ours.accumulate(batch, owners=list(range(len(ROWS))))

    model = trl_trainer.model
    inputs = trl_inputs(trl_trainer, ours.reference, tok.pad_token_id)
    load_weights(model, ours.model)  # the same weights as our policy's
    model.zero_grad(set_to_none=True)
    model.train()
    trl_trainer.beta, trl_trainer.loss_type = cfg.beta, loss_type
    loss = trl_trainer._compute_loss(model, inputs)
    loss.backward()
    assert stats["kl"] > 1e-4 and abs(loss.item()) > 1e-3
    assert math.isclose(stats["loss"], loss.item(), rel_tol=1e-5, abs_tol=1e-8), \
        (loss_type, stats["loss"], loss.item())
    torch.testing.assert_close(grads_of(ours.train_params), grads_of(model.parameters()),
                               rtol=1e-4, atol=1e-7)


def test_row_weights_aggregate_as_each_loss_type():
    """Rows are policy turns; a TRL sequence is an episode (owners), micro-batches of 2.
    Tokens 3, 1 (episode 0), 4 (episode 1), 2 (episode 2): weights by hand."""
    tokens, owners = [3, 1, 4, 2], [0, 0, 1, 2]

    def w(loss_type):
        return loss_row_weights(loss_type, tokens, owners, 2, MAX_COMPLETION).tolist()

    assert w("dapo") == pytest.approx([1 / 10] * 4)
    assert w("bnpo") == pytest.approx([1 / (4 * 2)] * 2 + [1 / (6 * 2)] * 2)
    assert w("grpo") == pytest.approx([1 / (4 * 3)] * 2 + [1 / (4 * 3), 1 / (2 * 3)])
    assert w("dr_grpo") == pytest.approx([1 / (3 * MAX_COMPLETION)] * 4)
    with pytest.raises(ValueError, match="loss_type"):
        GRPOConfig(loss_type="sum")
