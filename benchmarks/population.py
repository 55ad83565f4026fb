"""Low-rank ES scored as one population batch against plain batched inference (issue 38).

    python benchmarks/population.py [--model DIR] [--threads 2] [--quick]
        [--experiments countdown sudoku] [--G 16 64] [--ranks 1 4] [--tasks N]
        [--paths plain plain-prefix-per-member lowrank fullrank
                 plain-bf16w lowrank-bf16w fullrank-bf16w]

The generation: generation 0 of the tiny `all`'s H*=1 esopt run of each experiment
(config/config.yaml + config/scales/tiny.yaml: its tasks, the train decoder with its
common-random-numbers seed; Countdown-2: 16 tasks, 24 new tokens; Sudoku 4x4: 4 boards,
up to 3 turns, 8 new tokens), with the population size set to G. Paths, on the same
tasks, in one process on one loaded model:
  plain:     (a) the ceiling: the same G x tasks episodes by the base model in one
             lockstep batch (the population scorer's batch with no per-member term and
             the shared prompt prefix encoded once);
  plain-prefix-per-member: (a') the same, the prefix encoded once per group, as every ES
             path must (each member reads the prefix through its own weights): (b)/(a')
             is what the per-member terms cost, (a')/(a) what the prefix costs ES;
  lowrank:   (b) low-rank ES at each --ranks r (the run's ES config with rank r, EGGROLL's
             full-rank vector noise), the whole population scored as one batch by the
             pipeline's run_population_episodes (esopt.backends.lowrank_batch);
  fullrank:  (c) full-rank ES, the default path: one direction at a time, perturb +
             run_episodes (kept prefix), the pipeline's score_direction;
  *-bf16w:   plain, lowrank and fullrank served in bfloat16-weights (bf16 matrices,
             float32 activations: esopt.backends.bf16_weights; a second model load;
             changes the numerics): the ISA lever on a CPU with AVX512-BF16. fullrank-bf16w
             is (c)'s best measured path. Ratios of a -bf16w path are to plain-bf16w
             (the same served weights); not run unless named in --paths.
Printed per path (one JSON line each, as it finishes): wall time, episodes/s, prompt and
generated tokens/s (the ledger's counts: the whole prompt of every turn), time in model
forwards with more than one new token (prefill: the kept prefix and each turn's suffix)
and in one-token decode steps (and their count); per (experiment, G) the ratios of
episodes/s to (a) at its fastest member batch, and a table of every path at the end.
--member-batches K ...: the batched paths also score K members (groups) per batch, one
batch after another (the pipeline's runtime.population_batch), beside all G in one.

The floor of (c): kernels measured at the start of the run at the same thread count (the
best float32 matmul GFLOP/s over the model's projection shapes, and bf16's for the -bf16w
paths; the streaming read GB/s
of a 1 GB tensor; torch.randn + add_ + copy_ over as many floats as the model has, one
direction's perturb and restore). Every forward a path runs costs at least max(its FLOPs
/ matmul GFLOP/s, its weights' bytes / read GB/s) (the meter counts the FLOPs of the real
tokens: matmuls, attention over the context, the logits kept); full rank adds G perturb +
restore floors. Printed for every path as forward_floor_s and floor_over_measured (floor
time / wall time; for (c) with the perturb floors).
--quick: Countdown, G=16, 4 tasks (a check that the script runs, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import nullcontext
from dataclasses import replace

import torch

from bench_model import smollm2_dir
from es_generation import ForwardMeter, matmul_ceiling, tiny_spec
from esopt.agent.rollout import run_episode_groups
from esopt.backends.hf import HFPolicy
from esopt.backends.hf_population import PopulationScorer
from esopt.es.strategy import ES
from esopt.pipeline.objective import (
    env_factory,
    run_population_episodes,
    score_direction,
    train_sampling,
    train_tasks,
)

BF16W = "-bf16w"
PATHS = ("plain", "plain-prefix-per-member", "lowrank", "fullrank",
         "plain-bf16w", "lowrank-bf16w", "fullrank-bf16w")


class FloorMeter(ForwardMeter):
    """ForwardMeter that also sums every forward's floor: max(its FLOPs / the matmul
    GFLOP/s, the model's weight bytes / the read GB/s)."""

    def __init__(self, model, gflops: float, read_gb_s: float):
        self.gflops, self.read_gb_s = gflops, read_gb_s
        self.weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        super().__init__(model)

    def reset(self):
        super().reset()
        self.floor_s = 0.0
        self.decode_steps = 0

    def __call__(self, *args, **kwargs):
        flops = self.flops
        self.decode_steps += kwargs["input_ids"].shape[1] == 1
        out = super().__call__(*args, **kwargs)
        self.floor_s += max((self.flops - flops) / (self.gflops * 1e9),
                            self.weight_bytes / (self.read_gb_s * 1e9))
        return out


def _best_s(fn, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def read_gb_per_s(mb: int = 1024) -> float:
    """Streaming read bandwidth: a sum over `mb` MB of float32, far beyond the caches."""
    x = torch.ones(mb * 2**20 // 4)
    return x.numel() * 4 / _best_s(x.sum, 5) / 1e9


def perturb_restore_floor_s(n: int) -> float:
    """One full-rank direction's perturb + restore floor: randn + add_ + copy_ of n floats."""
    noise, weights, master = torch.empty(n), torch.zeros(n), torch.zeros(n)
    return (_best_s(lambda: torch.randn(n, out=noise))
            + _best_s(lambda: weights.add_(noise, alpha=1e-3))
            + _best_s(lambda: weights.copy_(master)))


class PlainScorer(PopulationScorer):
    """(a): the population scorer's lockstep batch served by the base model: no
    per-member term, and the shared prefix encoded once (plain batched inference)."""

    def __init__(self, policy: HFPolicy, groups: int, shared_prefix: bool = True):
        super().__init__(policy, [None] * groups, grouped=lambda counts: nullcontext())
        self.shared_prefix = shared_prefix

    def _prefix_kv(self, tokens: list[int]):
        if not self.shared_prefix:  # (a'): one prefix row per group
            return super()._prefix_kv(tokens)
        from transformers import DynamicCache

        from esopt.backends.hf import cache_kwarg

        model, k = self.policy.model, len(self.directions)
        cache = DynamicCache(config=model.config)
        model(input_ids=torch.tensor([tokens]), use_cache=True, logits_to_keep=1,
              **{cache_kwarg(model): cache})
        return [(layer.keys.expand(k, -1, -1, -1), layer.values.expand(k, -1, -1, -1))
                for layer in cache.layers]


def directions(spec, g: int, rank: int | None):
    """Generation 0's G directions of the run's ES config, full rank or of rank `rank`."""
    es = ES(replace(spec.es, population_size=g, rank=rank))
    return es.ask(es.state_at(0))


def score(path: str, policy: HFPolicy, spec, g: int, rank: int | None, batch: int = 0):
    """Each direction's (or, plain, each copy's) episodes of generation 0 on `path`; the
    batched paths take `batch` members (groups) per batch (0: all G in one)."""
    make, seeds, sampling = env_factory(spec), train_tasks(spec, 0), train_sampling(spec, 0)
    if path.startswith("fullrank"):
        return [score_direction(policy, spec, 0, d)[0] for d in directions(spec, g, None)]
    out, k = [], batch or g
    for start in range(0, g, k):
        n = min(k, g - start)
        if path.startswith("plain"):
            scorer = PlainScorer(policy, n, shared_prefix=path == "plain")
            out += run_episode_groups(scorer.generate_groups, make, seeds, sampling, groups=n)
        else:
            out += run_population_episodes(policy, directions(spec, g, rank)[start:start + n],
                                           make, seeds, sampling)
    return out


def measure(path, policy, meter, spec, g, rank=None, batch: int = 0, suffix: str = "") -> dict:
    """One timed path: throughput and where its time went (`suffix` names the policy's
    serving, "" or BF16W)."""
    meter.reset()
    t0 = time.perf_counter()
    per_direction = score(path, policy, spec, g, rank, batch)
    wall = time.perf_counter() - t0
    eps = [e for d in per_direction for e in d]
    prompt = sum(e.prompt_tokens for e in eps)
    gen = sum(e.completion_tokens for e in eps)
    return {
        "experiment": spec.experiment, "G": g, "tasks": spec.tasks_per_direction,
        "path": (path if rank is None else f"{path}-r{rank}") + suffix + (
            f"/k{batch}" if 0 < batch < g else ""),
        "wall_s": round(wall, 2),
        "episodes": len(eps), "episodes_per_s": round(len(eps) / wall, 3),
        "prompt_tok_per_s": round(prompt / wall, 1),
        "generated_tok_per_s": round(gen / wall, 2),
        "prompt_tokens": prompt, "generated_tokens": gen,
        "executed_tokens": meter.tokens, "padding_tokens": meter.padded,
        "prefill_s": round(meter.prefill_s, 2), "decode_s": round(meter.decode_s, 2),
        "decode_steps": meter.decode_steps,
        "other_s": round(wall - meter.prefill_s - meter.decode_s, 2),
        "forward_floor_s": round(meter.floor_s, 2),
        "mean_reward": round(sum(e.reward for e in eps) / len(eps), 4),
    }


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model directory (default: found or fetched by bench_model.py)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--experiments", nargs="+", default=["countdown", "sudoku"],
                    choices=("countdown", "sudoku"))
    ap.add_argument("--G", nargs="+", type=int, default=[16, 64], help="population sizes")
    ap.add_argument("--ranks", nargs="+", type=int, default=[1, 4], help="low-rank ranks")
    ap.add_argument("--tasks", type=int, default=0, help="tasks per direction (0: the run's)")
    ap.add_argument("--paths", nargs="+", choices=PATHS,
                    default=["plain", "plain-prefix-per-member", "lowrank", "fullrank"])
    ap.add_argument("--member-batches", nargs="*", type=int, default=[],
                    help="also score the batched paths k members (groups) per batch, for "
                         "each k < G given (default: all G members in one batch only)")
    ap.add_argument("--quick", action="store_true",
                    help="Countdown, G=16, 4 tasks: checks that the script runs")
    args = ap.parse_args()
    if args.quick:
        args.experiments, args.G, args.tasks = ["countdown"], [16], args.tasks or 4
    args.model = smollm2_dir(args.model)
    torch.set_num_threads(args.threads)
    gflops, read_gb_s = matmul_ceiling(), read_gb_per_s()
    policy = HFPolicy.load(args.model)
    pert_floor = perturb_restore_floor_s(policy.num_parameters)
    meter = FloorMeter(policy.model, gflops, read_gb_s)
    served = {"": (policy, meter)}
    if any(p.endswith(BF16W) for p in args.paths):
        bf16_gflops = matmul_ceiling(dtype=torch.bfloat16)
        bf16w = HFPolicy.load(args.model, serving_dtype="bfloat16-weights")
        served[BF16W] = (bf16w, FloorMeter(bf16w.model, bf16_gflops, read_gb_s))
    print(f"model {args.model}, threads {args.threads}, paths {args.paths}, "
          f"ranks {args.ranks}", flush=True)
    emit({"cpu_capability": torch.backends.cpu.get_cpu_capability(),
          "matmul_gflop_per_s": round(gflops, 1), "read_gb_per_s": round(read_gb_s, 1),
          **({"bf16_matmul_gflop_per_s": round(bf16_gflops, 1)} if BF16W in served else {}),
          "perturb_restore_floor_s": round(pert_floor, 3)})
    table = []
    for experiment in args.experiments:
        spec = tiny_spec(args.model, experiment)
        if args.tasks:
            spec = replace(spec, tasks_per_direction=args.tasks)
        d = spec.train_decoder
        print(f"{experiment}: {spec.tasks_per_direction} tasks, decoder T={d.temperature} "
              f"top_p={d.top_p} top_k={d.top_k} max_new={d.max_new_tokens}", flush=True)
        # Warm-up on a batch of up to 16 members: the first forwards of a process, and the
        # first touch of a batch's memory (the KV cache of its rows), are slower (measured:
        # a 1-episode warm-up left (a) at G=16 slower than (a'), 26.0 s vs 20.6 s).
        score("plain", policy, spec, min(args.G[0], 16), None)
        for g in args.G:
            rows = {}
            batches = sorted({k for k in args.member_batches if k < g} | {0})
            runs = [(path, rank, k) for path in args.paths
                    for rank in (args.ranks if path.startswith("lowrank") else [None])
                    for k in (batches if not path.startswith("fullrank") else [0])]
            for path, rank, k in runs:
                print(f"... {experiment} G={g} {path}{'' if rank is None else rank} k={k}",
                      file=sys.stderr, flush=True)
                suffix = BF16W if path.endswith(BF16W) else ""
                row = measure(path.removesuffix(suffix), *served[suffix], spec, g, rank, k,
                              suffix)
                floor = row["forward_floor_s"]
                if path.startswith("fullrank"):
                    floor += g * pert_floor
                    row["floor_s"] = round(floor, 2)
                row["floor_over_measured"] = round(floor / row["wall_s"], 3)
                rows[row["path"]] = row
                emit(row)
            for suffix in served:  # each served dtype against its own (a)
                mine = {p: r for p, r in rows.items()
                        if p.split("/")[0].endswith(BF16W) == bool(suffix)}
                plain = [r for p, r in mine.items() if p.split("/")[0] == "plain" + suffix]
                if not plain:
                    continue
                # (a): plain inference at its fastest member batch
                base = max(plain, key=lambda r: r["episodes_per_s"])
                ratios = {p: {
                    "episodes_per_s": round(r["episodes_per_s"] / base["episodes_per_s"], 3),
                    "generated_tok_per_s": round(
                        r["generated_tok_per_s"] / base["generated_tok_per_s"], 3)}
                    for p, r in mine.items() if r is not base}
                emit({"experiment": experiment, "G": g, "plain": base["path"],
                      "ratios_vs_plain": ratios})
                for r in mine.values():
                    r["over_plain"] = round(r["episodes_per_s"] / base["episodes_per_s"], 3)
            table += rows.values()
    print("\nexperiment  G   path (/kK: K members a batch)  wall_s  episodes/s  /plain  "
          "floor/measured")
    for r in table:
        print(f"{r['experiment']:<10} {r['G']:>3}  {r['path']:<30} {r['wall_s']:>7.1f} "
              f"{r['episodes_per_s']:>10.2f}  {r.get('over_plain', float('nan')):>6.3f}  "
              f"{r['floor_over_measured']:>14.3f}")


if __name__ == "__main__":
    main()
