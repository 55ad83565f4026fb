"""Low-rank ES population in one forward (EGGROLL): x W^T + s_i (x B_i) A_i^T per row.

Inside `population(policy, directions)` every nn.Linear and nn.Embedding whose weight is
a matrix that low-rank ES perturbs gets a forward hook adding its row's member's low-rank
term; the serving weights stay theta, so P members cost one batched forward plus
O(P r (m + n)) per matrix instead of P weight rewrites. With full-rank vector noise
(Direction.full_rank_vectors, EGGROLL's default) each member also has its own perturbed
copy of every non-matrix tensor: a norm's weight becomes a [rows, 1, H] tensor of the
rows' members' copies, a Linear's bias is shifted row by row in its hook. Row b of the
batch belongs to member `members[b]` (set_members before each forward/generate). Tied
weights (lm_head = embed_tokens) share one (A, B), as they share one noise in the
sequential path. Exact up to float rounding against perturbed(direction) (a test bounds
the logits' difference).

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
        # name -> [P, *shape]: each member's perturbed copy of a non-matrix tensor (norm
        # weights, biases), written by the policy's own perturbation arithmetic.
        self.vectors: dict[str, torch.Tensor] = {}
        for name, p in policy.serving_parameters.items():
            if is_lowrank(p.shape):
                ab = [factors(d.seed, name, p.shape, rank) for d in directions]
                self.factors[name] = (torch.stack([a for a, _ in ab]).to(dev, dtype),
                                      torch.stack([b for _, b in ab]).to(dev, dtype))
            elif any(d.full_rank_vectors for d in directions):
                stack = policy.master_weights()[name].expand(len(directions), *p.shape).clone()
                for j, d in enumerate(directions):
                    policy.write_perturbed(d, name, stack[j].view(-1))
                self.vectors[name] = stack.to(dev, dtype)

    def linear_hook(self, name, bias: str | None = None):
        def hook(module, inputs, out):
            m = self.members
            if name in self.factors:
                a, b = self.factors[name]
                xb = torch.einsum("b...n,bnr->b...r", inputs[0], b[m])
                delta = torch.einsum("b...r,bmr->b...m", xb, a[m])
                out = out + delta * self.scale[m].view(-1, *([1] * (out.dim() - 1)))
            if bias is not None:  # the row's member's bias in place of the served one
                shift = self.vectors[bias][m] - module.bias
                out = out + shift.view(shift.shape[0], *([1] * (out.dim() - 2)), -1)
            return out
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
    handles, rowwise = [], []
    for module in policy.model.modules():
        local = {k: names.get(id(p)) for k, p in module.named_parameters(recurse=False)}
        vectors = {k: n for k, n in local.items() if n in pop.vectors}
        w = local.get("weight")
        if isinstance(module, nn.Linear) and (w in pop.factors or vectors):
            handles.append(module.register_forward_hook(
                pop.linear_hook(w, vectors.get("bias"))))
        elif isinstance(module, nn.Embedding) and w in pop.factors:
            handles.append(module.register_forward_hook(pop.embedding_hook(w)))
        elif vectors and len(vectors) == len(local):
            # Elementwise weights (norms): each row multiplies by its member's copy, [B, 1,
            # H] against hidden states [B, T, H], as hf_population.grouped_weights does.
            rowwise += [(module, k, n, module._parameters[k]) for k, n in vectors.items()]
        elif vectors:
            raise NotImplementedError(f"low-rank population: no per-member form of the "
                                      f"vectors of {type(module).__name__}")
    # A shared-prefix KV cache would be computed once for all rows, i.e. for one member.
    prefix_cache, policy.prefix_cache = policy.prefix_cache, False

    def set_members(members) -> None:
        pop.members = torch.as_tensor(members, dtype=torch.long, device=pop.scale.device)
        for module, k, name, _ in rowwise:
            module._parameters[k] = pop.vectors[name][pop.members].unsqueeze(1)

    try:
        set_members([0])
        yield set_members
    finally:
        for h in handles:
            h.remove()
        for module, k, _, original in rowwise:
            module._parameters[k] = original
        policy.prefix_cache = prefix_cache
