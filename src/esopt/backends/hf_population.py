"""Population-batched scoring on the HF backend: many ES directions in one forward, exact.

The k perturbed weight sets theta + sign*sigma*eps_i are held at once (k x the float32
model in memory), written from the float32 master with the same fused add as
`HFPolicy.perturbed`, so each set is bit-identical to that direction's serving weights.
The batch's rows are ordered direction by direction; every Linear and Embedding runs one
matmul (lookup) per direction on that direction's rows, and every norm multiplies each row
by its own direction's weight. The result equals scoring the directions one at a time
(same sampler, same per-row seeds, same prefix reuse), up to floating-point differences
where the population batch pads a turn wider than a direction alone would.

On a CPU it does not pay: decoding reads every direction's weights once per step either
way and prefill is matmul-bound either way, so batching saves only per-step dispatch,
while k weight sets (4.3 GB for G=8 on SmolLM2-135M) trash the caches. Measured on one
tiny-scale generation (benchmarks/es_generation.py, 1 thread, loaded 2-core machine, two
runs): 231 s and 142 s population-batched vs 178 s and 133 s one direction at a time with
the same decode loop and kept prefix, identical episodes (64/64 both times). It stays an
option (runtime.population_batch, default 1): on an accelerator one batched forward over
many small weight sets is what fills the device, but that needs a batched matmul over the
stacked weights (not written; this one loops over directions in every Linear) and a device
other than the CPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from esopt.backends.hf import HFPolicy, batch_cache, cache_kwarg, empty_cache, reuse_prefix
from esopt.backends.hf_decode import decode, row_generators
from esopt.chat import Completion, Conversation, SamplingParams
from esopt.es.strategy import Direction

MB = 2**20


def directions_per_batch(policy: HFPolicy, memory_mb: float) -> int:
    """How many perturbed float32 weight sets fit in `memory_mb` (at least 1)."""
    per_set = policy.num_parameters * 4 / MB
    return max(1, int(memory_mb // per_set))


def perturbed_stack(policy: HFPolicy, directions: Sequence[Direction]) -> dict[str, torch.Tensor]:
    """name -> [k, *shape] float32: master + sign*sigma*eps(direction) for each direction."""
    out = {}
    for name, master in policy.master.items():
        stack = torch.empty((len(directions), *master.shape), dtype=torch.float32)
        for j, d in enumerate(directions):
            policy.write_perturbed(d, name, stack[j].view(-1))
        out[name] = stack
    return out


class _Groups:
    """Rows per direction of the current forward (direction-major order)."""

    def __init__(self, counts: list[int]):
        self.spans = []
        start = 0
        for g, c in enumerate(counts):
            if c:
                self.spans.append((g, start, start + c))
            start += c
        self.counts = counts


@contextmanager
def grouped_weights(model, stack: dict[str, torch.Tensor], names: dict[int, str],
                    counts: list[int]) -> Iterator[None]:
    """Inside the block `model` computes row group g with weight set g of `stack`.

    `names` maps id(parameter) -> its name in `stack` (tied weights share one entry).
    """
    groups = _Groups(counts)
    rows = torch.tensor(counts)
    patched, swapped = [], []
    for module in model.modules():
        local = dict(module.named_parameters(recurse=False))
        if not local:
            continue
        stacked = {k: stack[names[id(p)]] for k, p in local.items()}
        if isinstance(module, torch.nn.Linear):
            module.forward = _grouped_linear(stacked["weight"], stacked.get("bias"), groups)
            patched.append(module)
        elif isinstance(module, torch.nn.Embedding):
            module.forward = _grouped_embedding(stacked["weight"], groups)
            patched.append(module)
        elif all(p.dim() == 1 for p in local.values()):
            # Elementwise weights (norms): each row gets its direction's copy, [B, 1, H]
            # against hidden states [B, T, H]: the same products as [H] against one row.
            for k, s in stacked.items():
                swapped.append((module, k, module._parameters[k]))
                module._parameters[k] = torch.repeat_interleave(s, rows, dim=0).unsqueeze(1)
        else:
            raise NotImplementedError(
                f"population batching has no grouped form of {type(module).__name__}")
    try:
        yield
    finally:
        for module in patched:
            del module.forward
        for module, k, p in swapped:
            module._parameters[k] = p


def _grouped_linear(weight, bias, groups: _Groups):
    def forward(x):
        return torch.cat([F.linear(x[a:b], weight[g], None if bias is None else bias[g])
                          for g, a, b in groups.spans])
    return forward


def _grouped_embedding(weight, groups: _Groups):
    def forward(ids):
        return torch.cat([F.embedding(ids[a:b], weight[g]) for g, a, b in groups.spans])
    return forward


class PopulationScorer:
    """Scores k directions together on one HFPolicy (CPU; full rank: float32 serving).

    `grouped(counts)` is the context inside which the model computes row group g (counts[g]
    rows, groups in order) under direction g: by default the held full-rank weight sets
    (`grouped_weights`); `lowrank_population` passes the low-rank hooks instead."""

    def __init__(self, policy: HFPolicy, directions: Sequence[Direction], grouped=None,
                 prefix_cache: bool | None = None):
        # Full-rank weight sets are float32 copies; low-rank hooks (`grouped` given) add
        # their terms in whatever dtype the model computes in.
        if not (policy.population_capable if grouped is None
                else policy.lowrank_population_capable):
            raise ValueError("population batching needs a CPU policy (full rank: float32)")
        self.policy = policy
        self.directions = list(directions)
        if grouped is None:
            stack = perturbed_stack(policy, self.directions)
            names = {id(p): n for n, p in policy.model.named_parameters()}
            grouped = lambda counts: grouped_weights(policy.model, stack, names, counts)  # noqa: E731
        self.grouped = grouped
        self.prefix_cache = policy.prefix_cache if prefix_cache is None else prefix_cache
        self.session: dict = {}

    def _forward(self, counts):
        model = self.policy.model

        def forward(input_ids, attention_mask, position_ids, cache):
            with self.grouped(counts):
                out = model(input_ids=input_ids, attention_mask=attention_mask,
                            position_ids=position_ids, use_cache=True, logits_to_keep=1,
                            **{cache_kwarg(model): cache})
            return out.logits[:, -1].float()
        return forward

    def _prefix_kv(self, tokens: list[int]):
        """Per layer (keys, values) [k, heads, len, dim]: row g under direction g."""
        from transformers import DynamicCache

        k = len(self.directions)
        cache = DynamicCache(config=self.policy.model.config)
        ids = torch.tensor([tokens] * k, dtype=torch.long)
        model = self.policy.model
        with self.grouped([1] * k):
            model(input_ids=ids, use_cache=True, logits_to_keep=1,
                  **{cache_kwarg(model): cache})
        return [(layer.keys, layer.values) for layer in cache.layers]

    @torch.inference_mode()
    def generate_groups(self, groups: list[list[Conversation]],
                        sampling: SamplingParams) -> list[list[Completion]]:
        """Completions of each direction's conversations, all directions in one batch."""
        policy, tok = self.policy, self.policy.tokenizer
        counts = [len(g) for g in groups]
        if len(counts) != len(self.directions):
            raise ValueError(f"{len(counts)} groups for {len(self.directions)} directions")
        if any(c > policy.max_batch_size for c in counts):
            raise ValueError(f"a group exceeds max_batch_size={policy.max_batch_size}")
        ids = [tok(policy.render(c), add_special_tokens=False)["input_ids"]
               for g in groups for c in g]
        if not ids:
            return [[] for _ in groups]
        prefix, cache = 0, empty_cache()
        if self.prefix_cache and len(ids) > 1:
            prefix, kv = reuse_prefix(self.session, ids, self._prefix_kv)
            if prefix:
                per_group = [[(k[g:g + 1], v[g:g + 1]) for k, v in kv]
                             for g in range(len(counts))]
                cache = batch_cache(per_group, counts, "cpu")
        # Row i of direction g draws from seed + i, as when g is scored alone.
        gens = [gen for c in counts for gen in row_generators(sampling.seed, c)]
        flat = decode(self._forward(counts), tok, ids, prefix, cache, sampling, gens)
        out, start = [], 0
        for c in counts:
            out.append(flat[start:start + c])
            start += c
        return out


@contextmanager
def lowrank_population(policy: HFPolicy, directions: Sequence[Direction]
                       ) -> Iterator[PopulationScorer]:
    """A scorer of low-rank (EGGROLL) directions: the serving weights stay theta and each
    row adds its member's s (x B) A^T (`esopt.backends.lowrank_batch`), so k members cost
    one batched forward, no weight sets and no perturb/restore. The kept prefix KV is
    computed per member (one row each), as for the full-rank population."""
    from esopt.backends.lowrank_batch import population

    prefix_cache = policy.prefix_cache  # population() turns the policy's own cache off
    with population(policy, directions) as set_members:
        @contextmanager
        def members(counts):
            set_members(torch.repeat_interleave(torch.arange(len(counts)),
                                                torch.tensor(counts)))
            yield

        yield PopulationScorer(policy, directions, members, prefix_cache)
