"""Token log-probabilities (and hidden states) of RL batches, with a shared prompt prefix.

Agent prompts repeat a long common prefix (system prompt, few-shot turns: 178 of 243
tokens on 4x4 Sudoku) and the policy writes a few tokens per turn, so a plain forward over
each (prompt + completion) spends most of its FLOPs re-reading the same prefix. Here the
prefix is run once per micro-batch, its KV cache repeated over the rows, and only the
suffixes are run on top; gradients flow back through the repeated cache into the one
prefix pass, so the loss and its gradient are those of the plain forward (tested to float
rounding). Positions before the prefix end carry no logits: they are never policy tokens.
"""

from __future__ import annotations

import torch


def shared_prefix_length(input_ids: torch.Tensor, loss_mask: torch.Tensor) -> int:
    """Length of the token prefix all rows share, stopped one token before the first
    policy token of any row (so every predicted policy token comes from a suffix logit)."""
    assert input_ids.shape == loss_mask.shape and input_ids.ndim == 2
    same = (input_ids == input_ids[:1]).all(dim=0)
    common = int(same.long().cumprod(dim=0).sum())
    policy = loss_mask.bool()
    first_policy = int(torch.where(policy.any(dim=1), policy.float().argmax(dim=1),
                                   torch.full_like(policy[:, 0], input_ids.shape[1],
                                                   dtype=torch.long)).min())
    return max(0, min(common, first_policy - 1))


def prefix_shared_forward(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          loss_mask: torch.Tensor, *, hidden: bool = False
                          ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(token_{t+1} | tokens_<=t) for t in [0, L-1), shape (B, L-1), and optionally
    the last hidden state at the same positions, (B, L-1, d). Entries inside the shared
    prefix are zero (they predict prompt tokens, which no loss reads).

    Rows are right-padded; `loss_mask` (B, L) marks policy tokens.
    """
    b, length = input_ids.shape
    p = shared_prefix_length(input_ids, loss_mask)
    if p == 0:
        out = model(input_ids=input_ids, attention_mask=attention_mask,
                    output_hidden_states=hidden)
        logits, last, start = out.logits, out.hidden_states[-1] if hidden else None, 0
    else:
        from transformers import DynamicCache

        from esopt.backends.hf import cache_kwarg

        kw = cache_kwarg(model)
        cache = DynamicCache(config=model.config)
        model(input_ids=input_ids[:1, :p], use_cache=True, **{kw: cache})
        cache.batch_repeat_interleave(b)
        out = model(input_ids=input_ids[:, p:], attention_mask=attention_mask,
                    use_cache=False, output_hidden_states=hidden, **{kw: cache})
        logits, last, start = out.logits, out.hidden_states[-1] if hidden else None, p
    # Logit at absolute position start + j predicts token start + j + 1.
    lp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    lp = lp.gather(-1, input_ids[:, start + 1:, None]).squeeze(-1)
    logp = torch.cat([lp.new_zeros((b, start)), lp], dim=1)
    states = None
    if hidden:
        last = last[:, :-1].float()
        states = torch.cat([last.new_zeros((b, start, last.shape[-1])), last], dim=1)
    assert logp.shape == (b, length - 1)
    return logp, states
