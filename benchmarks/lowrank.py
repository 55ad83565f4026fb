"""Low-rank ES throughput: P members x B prompts in one batched generate (EGGROLL hooks)
against full-rank ES, P sequential perturb + generate calls over the same B prompts.

    python benchmarks/lowrank.py [--model DIR] [--P 4] [--B 4] [--rank 1] [--tokens 16]

Both decode greedily with the same token budget; tokens/s counts generated tokens. The
low-rank sequential path (perturbed() with rank r, then generate) is reported too: it
isolates the batching gain from the cost of the noise. One run, ratios in the output.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from bench_model import smollm2_dir
from esopt.backends.hf import HFPolicy
from esopt.backends.lowrank_batch import population
from esopt.chat import SamplingParams
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig

PROMPTS = [[{"role": "user", "content": f"What is {a} + {b}? Answer with a number."}]
           for a, b in [(2, 3), (3, 4), (10, 5), (7, 8), (1, 9), (6, 6), (4, 2), (8, 3)]]


def directions(p: int, rank: int | None):
    es = ES(ESConfig(population_size=max(p, 2), rank=rank,
                     sigma=SigmaSchedule("constant", 1e-3, 1e-3, 1)))
    return es.ask(es.init())[:p]


def sequential(policy, ds, prompts, sampling) -> tuple[float, int]:
    t0, tokens = time.perf_counter(), 0
    for d in ds:
        with policy.perturbed(d):
            tokens += sum(c.completion_tokens for c in policy.generate(prompts, sampling))
    return time.perf_counter() - t0, tokens


def batched(policy, ds, prompts, sampling) -> tuple[float, int]:
    t0 = time.perf_counter()
    with population(policy, ds) as set_members:
        set_members([i for i in range(len(ds)) for _ in prompts])
        out = policy.generate([p for _ in ds for p in prompts], sampling)
    return time.perf_counter() - t0, sum(c.completion_tokens for c in out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="model directory (default: found or fetched by bench_model.py)")
    ap.add_argument("--P", type=int, default=4)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    args.model = smollm2_dir(args.model)
    torch.set_num_threads(args.threads)
    policy = HFPolicy.load(args.model, max_batch_size=args.P * args.B)
    policy.prefix_cache = False  # the same prompt processing on every path
    prompts = PROMPTS[: args.B]
    sampling = SamplingParams(max_new_tokens=args.tokens, temperature=0.0)
    policy.generate(prompts[:1], sampling)  # warm-up
    full_s, full_tok = sequential(policy, directions(args.P, None), prompts, sampling)
    lr_seq_s, lr_seq_tok = sequential(policy, directions(args.P, args.rank), prompts,
                                      sampling)
    lr_s, lr_tok = batched(policy, directions(args.P, args.rank), prompts, sampling)
    res = {"P": args.P, "B": args.B, "rank": args.rank, "max_new_tokens": args.tokens,
           "threads": args.threads,
           "full_rank_sequential_tok_s": full_tok / full_s,
           "lowrank_sequential_tok_s": lr_seq_tok / lr_seq_s,
           "lowrank_batched_tok_s": lr_tok / lr_s,
           "batched_over_full_rank": (lr_tok / lr_s) / (full_tok / full_s),
           "seconds": {"full_rank_sequential": full_s, "lowrank_sequential": lr_seq_s,
                       "lowrank_batched": lr_s}}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
