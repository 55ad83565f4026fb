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

The corrections run member-major: the batch viewed as [members, rows each * tokens, n]
(a view when the rows come member by member in equal numbers, as the population scorer
orders them; otherwise padded), two batched matmuls per Linear against the members'
stacked B [P, n, r] and A^T [P, r, m]. Gathering each row's factors instead (b[m]:
[rows, n, r], for the tied head [rows, 49152, r]) copied megabytes per Linear per step
(benchmarks/population.py measures both).

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

from esopt.backends.bf16_weights import activation_dtype
from esopt.es.lowrank import factors, is_lowrank
from esopt.es.strategy import Direction


class _Layout:
    """Where each batch row sits in the member-major layout [P members, slots, ...]: rows
    grouped by member (stable order), each member's group padded with zero rows to the
    largest (a member without rows gets only padding). When every member has the same
    number of rows, already in member order (how the population scorer orders them), the
    layout is a view of the batch: no copy."""

    def __init__(self, members: torch.Tensor, population_size: int):
        if members.numel() and not (0 <= int(members.min()) and
                                    int(members.max()) < population_size):
            raise ValueError(f"members out of range [0, {population_size})")
        self.size = population_size
        counts = torch.bincount(members, minlength=population_size)
        self.slots = int(counts.max()) if members.numel() else 0
        ordered = bool((members[1:] >= members[:-1]).all())
        self.is_view = ordered and bool((counts == self.slots).all())
        if not self.is_view:
            order = torch.argsort(members, stable=True)
            start = torch.cumsum(counts, 0) - counts  # first sorted row of each member
            pos = torch.empty_like(members)
            pos[order] = torch.arange(len(members)) - start[members[order]]
            self.slot = members * self.slots + pos    # row -> its flat padded slot

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """[rows, *rest, k] -> [P, slots * prod(rest), k]."""
        k = x.shape[-1]
        if self.is_view:
            return x.reshape(self.size, -1, k)
        padded = x.new_zeros((self.size * self.slots, *x.shape[1:]))
        padded[self.slot] = x
        return padded.view(self.size, -1, k)

    def add_product(self, out: torch.Tensor, x: torch.Tensor, w: torch.Tensor
                    ) -> torch.Tensor:
        """out [rows, *rest, k] += x @ w per member, x [P, slots * prod(rest), j] in the
        layout, w [P, j, k]: in place, in one pass over out when the layout is a view."""
        if self.is_view:
            out.view(self.size, -1, out.shape[-1]).baddbmm_(x, w)
            return out
        return out.add_(torch.bmm(x, w).view(-1, *out.shape[1:])[self.slot])


class _Population:
    def __init__(self, policy, directions: Sequence[Direction]):
        ranks = {d.rank for d in directions}
        if len(ranks) != 1 or None in ranks:
            raise ValueError("a low-rank population needs directions of one rank")
        rank = ranks.pop()
        dev = next(policy.model.parameters()).device
        self.size = len(directions)
        # float32 whatever the serving dtype: sigma is not rounded before the product is.
        self.scale = torch.tensor([d.sign * d.sigma / math.sqrt(rank) for d in directions],
                                  dtype=torch.float32, device=dev)
        self.scale_3d = self.scale.view(-1, 1, 1)
        self.factors: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        # Linear: (B [P, n, r], A^T [P, r, m]); embedding: (A [P, m, r], B^T [P, r, n]):
        # the operands of the two batched matmuls, contiguous, made once per population.
        self.linear: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.embedding: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        # name -> [P, *shape]: each member's perturbed copy of a non-matrix tensor (norm
        # weights, biases), written by the policy's own perturbation arithmetic.
        self.vectors: dict[str, torch.Tensor] = {}
        for name, p in policy.serving_parameters.items():
            if is_lowrank(p.shape):
                ab = [factors(d.seed, name, p.shape, rank) for d in directions]
                self.factors[name] = (torch.stack([a for a, _ in ab]).to(dev),
                                      torch.stack([b for _, b in ab]).to(dev))
            elif any(d.full_rank_vectors for d in directions):
                stack = policy.master_weights()[name].expand(len(directions), *p.shape).clone()
                for j, d in enumerate(directions):
                    policy.write_perturbed(d, name, stack[j].view(-1))
                self.vectors[name] = stack.to(dev, p.dtype)
        self.set_members(torch.zeros(1, dtype=torch.long, device=dev))

    def set_members(self, members: torch.Tensor) -> None:
        self.members = members
        self.layout = _Layout(members, self.size)

    # The factors are cast to the dtype the module returns its output in (the weights'
    # dtype, float32 under bfloat16-weights), the dtype the correction is added in.
    def prepare_linear(self, name: str, dtype: torch.dtype) -> None:
        if name not in self.linear:
            a, b = self.factors[name]
            self.linear[name] = (b.to(dtype).contiguous(),
                                 a.transpose(1, 2).to(dtype).contiguous())

    def prepare_embedding(self, name: str, dtype: torch.dtype) -> None:
        if name not in self.embedding:
            a, b = self.factors[name]
            self.embedding[name] = (a.to(dtype).contiguous(),
                                    b.transpose(1, 2).to(dtype).contiguous())

    def linear_hook(self, name, bias: str | None = None):
        def hook(module, inputs, out):
            if name in self.linear:  # out += s (x B) A^T, one bmm pair per Linear
                b, a_t = self.linear[name]
                x = self.layout.gather(inputs[0].to(b.dtype))
                xb = torch.bmm(x, b).mul_(self.scale_3d)
                out = self.layout.add_product(out, xb, a_t)
            if bias is not None:  # the row's member's bias in place of the served one
                shift = self.vectors[bias][self.members] - module.bias
                out = out + shift.view(shift.shape[0], *([1] * (out.dim() - 2)), -1)
            return out
        return hook

    def embedding_hook(self, name):
        def hook(module, inputs, out):  # out += s A[ids] B^T
            a, b_t = self.embedding[name]
            ids = inputs[0]
            rows = a[self.members.view(-1, *([1] * (ids.dim() - 1))), ids]  # (batch, ..., r)
            xa = self.layout.gather(rows).mul_(self.scale_3d)
            return self.layout.add_product(out, xa, b_t)
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
            if w in pop.factors:
                pop.prepare_linear(w, activation_dtype(module))
            handles.append(module.register_forward_hook(
                pop.linear_hook(w, vectors.get("bias"))))
        elif isinstance(module, nn.Embedding) and w in pop.factors:
            pop.prepare_embedding(w, activation_dtype(module))
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

    pop.factors.clear()  # the hooks hold what they use, in their layouts

    def set_members(members) -> None:
        pop.set_members(torch.as_tensor(members, dtype=torch.long, device=pop.scale.device))
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
