"""A hand-written batched decode loop over a causal LM's forward, and its per-row sampler.

Why not `generate`: (1) sampling. Each row draws from its own `torch.Generator`, seeded
`(seed + row) mod 2**31` like the vLLM backend's per-request seeds, and the sampler
(temperature, top-k, top-p) works row by row, so a row's tokens depend only on its own
logits and seed, never on which other rows share the batch: a population batch of many
directions samples exactly what each direction samples alone. (2) the loop runs over any
`forward` (the plain model, or the population's grouped weights) and over a KV cache that
the caller fills with a reused prefix.

Layout of a batch: [shared prefix, in the cache][padding][own suffix]; position ids follow
the attention mask, so every row sees the positions it would have alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from esopt.chat import Completion, SamplingParams

# forward(input_ids [B, T], attention_mask [B, cached + T], position_ids [B, T], cache)
#   -> logits of the last position [B, V] (float32)
Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, object], torch.Tensor]


def row_generators(seed: int, rows: int) -> list[torch.Generator]:
    """One generator per row, seeded (seed + row) mod 2**31 (the vLLM backend's rule)."""
    gens = []
    for i in range(rows):
        g = torch.Generator()
        g.manual_seed((seed + i) % 2**31)
        gens.append(g)
    return gens


def sample_next(logits: torch.Tensor, sampling: SamplingParams,
                generators: Sequence[torch.Generator]) -> list[int]:
    """Next token of each row: argmax when greedy, else temperature, then top-k (exactly k
    candidates, torch.topk's order), then top-p (the smallest prefix of the sorted
    candidates whose mass reaches top_p), then one draw from the row's generator."""
    if sampling.greedy:
        return logits.argmax(-1).tolist()
    scaled = logits.float() / sampling.temperature
    k = sampling.top_k if 0 < sampling.top_k < scaled.shape[-1] else scaled.shape[-1]
    values, index = torch.topk(scaled, k, dim=-1)  # sorted, descending
    probs = values.softmax(-1)
    if sampling.top_p < 1:
        before = probs.cumsum(-1) - probs  # mass of the better candidates
        probs = probs.masked_fill(before >= sampling.top_p, 0.0)
    out = []
    for i, g in enumerate(generators):
        j = torch.multinomial(probs[i], 1, generator=g).item()
        out.append(int(index[i, j]))
    return out


def pack(ids: Sequence[Sequence[int]], prefix: int, pad_id: int
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """[shared prefix][padding][own suffix] per row; with prefix 0 this is left padding."""
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):
        suffix = row[prefix:]
        input_ids[i, :prefix] = torch.tensor(row[:prefix], dtype=torch.long)
        mask[i, :prefix] = 1
        input_ids[i, width - len(suffix):] = torch.tensor(suffix, dtype=torch.long)
        mask[i, width - len(suffix):] = 1
    return input_ids, mask


def decode(forward: Forward, tokenizer, ids: Sequence[Sequence[int]], prefix: int, cache,
           sampling: SamplingParams, generators: Sequence[torch.Generator]
           ) -> list[Completion]:
    """Complete every row; `cache` (never None: the loop appends to it) already holds the
    KV of the first `prefix` tokens (shared by all rows) for every row, or is empty with
    prefix 0. A row ends at EOS, at a stop
    string in its generated text (never the prompt), or after max_new_tokens."""
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    input_ids, mask = pack(ids, prefix, pad)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    logits = forward(input_ids[:, prefix:], mask, positions[:, prefix:], cache)
    last = positions[:, -1:]
    rows = len(ids)
    out: list[list[int]] = [[] for _ in range(rows)]
    ended = [False] * rows
    hit_stop = [False] * rows
    live = list(range(rows))
    for step in range(sampling.max_new_tokens):
        tokens = sample_next(logits[live], sampling, [generators[i] for i in live])
        still = []
        for i, t in zip(live, tokens, strict=True):
            if t == eos:
                ended[i] = True
                continue
            out[i].append(t)
            if sampling.stop and _stops(tokenizer, out[i], sampling.stop):
                hit_stop[i] = True
                continue
            still.append(i)
        live = still
        if not live or step == sampling.max_new_tokens - 1:
            break
        # Finished rows ride along on padding tokens, unmasked as in `generate` (their output
        # is ignored): an all-ones mask lets the attention skip building a mask.
        step_ids = torch.full((rows, 1), pad, dtype=torch.long)
        for i in live:
            step_ids[i, 0] = out[i][-1]
        mask = torch.cat([mask, torch.ones((rows, 1), dtype=torch.long)], dim=1)
        last = last + 1
        logits = forward(step_ids, mask, last, cache)
    results = []
    for i, row in enumerate(ids):
        text = tokenizer.decode(out[i], skip_special_tokens=True)
        text, cut = cut_at_stop(text, sampling.stop)
        token_ids = tuple(out[i]) + ((eos,) if ended[i] else ())
        results.append(Completion(text, len(row), len(token_ids),
                                  finish_reason(ended[i], hit_stop[i] or cut), token_ids))
    return results


def finish_reason(ended_on_eos: bool, hit_stop: bool) -> str:
    """`eos`, `stop` (a stop string) or `length`: why a row's generation ended."""
    return "eos" if ended_on_eos else "stop" if hit_stop else "length"


def _stops(tokenizer, generated: list[int], stop: tuple[str, ...]) -> bool:
    # Only a short tail is decoded: a stop string spans at most len(s) tokens.
    window = max(len(s) for s in stop) + 2
    tail = tokenizer.decode(generated[-window:], skip_special_tokens=True)
    return any(s in tail for s in stop)


def cut_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """The text before the first stop string, and whether one was found."""
    cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
    if not cuts:
        return text, False
    return text[: min(cuts)], True


def shared_prefix_len(ids: Sequence[Sequence[int]], limit: int | None = None) -> int:
    """Tokens shared by every row, leaving each row at least one uncached token."""
    cap = min(len(x) for x in ids) - 1
    if limit is not None:
        cap = min(cap, limit)
    n = 0
    first = ids[0]
    while n < cap and all(x[n] == first[n] for x in ids):
        n += 1
    return n
