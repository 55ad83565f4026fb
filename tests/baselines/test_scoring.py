"""Shared-prefix scoring equals the plain forward, in values and in gradients."""

import torch

from esopt.baselines.scoring import prefix_shared_forward, shared_prefix_length
from tests.baselines.test_grpo import text_batch

PREFIX = "You are playing a game. Rules: answer with one line. Example: r1c1=2. "


def plain_forward(model, batch):
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                output_hidden_states=True)
    logp = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)
    logp = logp.gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)
    return logp, out.hidden_states[-1][:, :-1]


def test_shared_prefix_stops_before_the_first_policy_token():
    ids = torch.tensor([[1, 2, 3, 4, 5, 0], [1, 2, 3, 9, 9, 9]])
    mask = torch.tensor([[0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1]])
    assert shared_prefix_length(ids, mask) == 3  # rows diverge at position 3
    # Identical rows: the prefix ends one token before the earliest policy token.
    assert shared_prefix_length(ids[:1].repeat(2, 1), mask[:1].repeat(2, 1)) == 3
    assert shared_prefix_length(torch.tensor([[5, 1], [6, 1]]), torch.tensor([[0, 1]] * 2)) == 0


def test_prefix_shared_forward_equals_the_plain_forward(tiny_policy):
    tok, model = tiny_policy.tokenizer, tiny_policy.model
    samples = [(PREFIX + "Board one?", "r1c2=3", 1.0),
               (PREFIX + "Board two, longer?", "r4c4=1", -1.0),
               (PREFIX + "Three?", "r2c1=4 and more words", 0.5)]
    batch = text_batch(tok, samples)
    assert shared_prefix_length(batch.input_ids, batch.loss_mask) > 10
    policy = batch.loss_mask[:, 1:].bool()
    params = list(model.parameters())
    for p in params:
        p.requires_grad_(True)

    def loss_and_grad(fn):
        model.zero_grad(set_to_none=True)
        logp, hidden = fn()
        loss = (logp * policy).sum() + (hidden.sum(-1) * policy).sum() * 1e-3
        loss.backward()
        return logp.detach(), hidden.detach(), torch.cat([p.grad.flatten() for p in params])

    lp_plain, h_plain, g_plain = loss_and_grad(lambda: plain_forward(model, batch))
    lp_shared, h_shared, g_shared = loss_and_grad(lambda: prefix_shared_forward(
        model, batch.input_ids, batch.attention_mask, batch.loss_mask, hidden=True))
    assert lp_shared.shape == lp_plain.shape and h_shared.shape == h_plain.shape
    torch.testing.assert_close(lp_shared[policy], lp_plain[policy], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(h_shared[policy], h_plain[policy], rtol=1e-4, atol=1e-5)
    assert torch.count_nonzero(g_plain) > 0
    torch.testing.assert_close(g_shared, g_plain, rtol=1e-3, atol=1e-6)
