"""Low-rank ES population in one forward (EGGROLL): x W^T + s_i (x B_i) A_i^T per row.

Inside `population(policy, directions)` every nn.Linear and nn.Embedding whose weight is
a matrix that low-rank ES perturbs gets a forward hook adding its row's member's low-rank
term; the serving weights stay theta, so P members cost one batched forward plus
O(P r (m + n)) per matrix instead of P weight rewrites. Row b of the batch belongs to
member `members[b]` (set_members before each forward/generate). Tied weights (lm_head =
embed_tokens) share one (A, B), as they share one noise in the sequential path. Exact up
to float rounding against perturbed(direction) (a test bounds the logits' difference).

vLLM would need the same term inside its fused linear kernels (a LoRA-like per-request
adapter: vLLM's punica LoRA kernels compute x B A^T per request with per-request adapter
ids, so each member would be registered as a rank-r LoRA adapter with A scaled by s_i).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from esopt.es.lowrank import factors, is_lowrank
from esopt.es.strategy import Direction


class _Population:
    def __init__(self, policy, directions: Sequence[Direction]):
        ranks = {d.rank for d in directions}
        if len(ranks) != 1 or None in ranks:
            raise ValueError("a low-rank population needs directions of one rank")
        rank = ranks.pop()
        dev = next(policy.model.parameters()).device
        dtype = next(policy.model.parameters()).dtype
        self.scale = torch.tensor([d.sign * d.sigma / math.sqrt(rank) for d in directions],
                                  dtype=dtype, device=dev)
        self.members = torch.zeros(1, dtype=torch.long, device=dev)
        self.factors: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for name, p in policy.serving_parameters.items():
            if is_lowrank(p.shape):
                ab = [factors(d.seed, name, p.shape, rank) for d in directions]
                self.factors[name] = (torch.stack([a for a, _ in ab]).to(dev, dtype),
                                      torch.stack([b for _, b in ab]).to(dev, dtype))

    def linear_hook(self, name):
        def hook(module, inputs, out):
            a, b = self.factors[name]
            m = self.members
            xb = torch.einsum("b...n,bnr->b...r", inputs[0], b[m])
            delta = torch.einsum("b...r,bmr->b...m", xb, a[m])
            return out + delta * self.scale[m].view(-1, *([1] * (out.dim() - 1)))
        return hook

    def embedding_hook(self, name):
        def hook(module, inputs, out):
            a, b = self.factors[name]
            m = self.members
            ids = inputs[0]
            rows = a[m.view(-1, *([1] * (ids.dim() - 1))), ids]  # (batch, ..., r)
            delta = torch.einsum("b...r,bnr->b...n", rows, b[m])
            return out + delta * self.scale[m].view(-1, *([1] * (out.dim() - 1)))
        return hook


@contextmanager
def population(policy, directions: Sequence[Direction]) -> Iterator:
    """Serve a low-rank population at once; yields set_members(index per batch row)."""
    if policy.is_perturbed:
        raise RuntimeError("population() inside perturbed()")
    pop = _Population(policy, directions)
    names = {id(p): n for n, p in policy.serving_parameters.items()}
    handles = []
    for module in policy.model.modules():
        w = getattr(module, "weight", None)
        name = names.get(id(w)) if w is not None else None
        if name not in pop.factors:
            continue
        if isinstance(module, nn.Linear):
            handles.append(module.register_forward_hook(pop.linear_hook(name)))
        elif isinstance(module, nn.Embedding):
            handles.append(module.register_forward_hook(pop.embedding_hook(name)))
    # A shared-prefix KV cache would be computed once for all rows, i.e. for one member.
    prefix_cache, policy.prefix_cache = policy.prefix_cache, False

    def set_members(members) -> None:
        pop.members = torch.as_tensor(members, dtype=torch.long, device=pop.scale.device)

    try:
        yield set_members
    finally:
        for h in handles:
            h.remove()
        policy.prefix_cache = prefix_cache
