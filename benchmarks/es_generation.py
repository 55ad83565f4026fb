"""Throughput of scoring one tiny-scale ES generation, the way main did it and the new ways.

    python benchmarks/es_generation.py [--model DIR] [--threads 1] [--levers]
                                       [--experiment sudoku|countdown]

The generation: config/config.yaml + config/scales/tiny.yaml, method esopt, generation 0 of
the tiny `all`'s run of --experiment: Sudoku H*=1 (G=8 directions x 4 shared 4x4 boards, up
to 3 turns, 8 new tokens) or Countdown-2 (G=16 x 16 shared tasks, one turn, 24 new tokens),
the train decoder (temperature 0.7, top-p 0.8, top-k 20). Paths, each on the same
directions and tasks:
  before:      policy.perturbed(d) + run_episodes per direction, transformers `generate`
               (shared prefix encoded again every turn, with full logits)
  loop:        the same, esopt's decode loop, prefix encoded every turn (--levers)
  loop+kv:     the same, the prefix KV kept across the turns of a rollout (--levers)
  population:  all directions in one batch (backends.hf_population), loop + kept prefix
  bf16:        loop+kv with bfloat16 serving weights (float32 master; oneDNN's bf16 matmuls
               on AVX512-BF16). Changes the experiment's numerics (`serving_dtype`): its
               rewards are not compared for equality, only reported.
  bf16-weights: loop+kv with serving_dtype bfloat16-weights: bf16 matrices, float32
               activations, norms and attention (esopt.backends.bf16_weights). Changes the
               numerics like bf16.
Printed per path: wall time, episodes/s, prompt and generated tokens/s (the ledger's
count: the whole prompt of every turn), time in prefill vs one-token decode forwards,
executed GFLOP/s (matmul + attention FLOPs of the tokens actually run through the model)
and its fraction of this CPU's float32 matmul GFLOP/s measured at the same thread count.
Rewards of every path are compared with `before` (sampled: the per-row sampler differs
from `generate`'s, so `before` differs by design; loop paths must agree with each other).
"""

from __future__ import annotations

import argparse
import inspect
import json
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from bench_model import smollm2_dir
from esopt.agent.rollout import run_episodes
from esopt.backends.hf import HFPolicy
from esopt.envs import make_env
from esopt.es.strategy import ES
from esopt.pipeline.config import run_specs
from esopt.pipeline.objective import run_population_episodes, train_sampling, train_tasks

ROOT = Path(__file__).resolve().parents[1]
SERVING = {"bf16": "bfloat16", "bf16-weights": "bfloat16-weights"}
PATHS = ("before", "loop", "loop+kv", "population", "bf16", "bf16-weights")


def tiny_spec(model: str, experiment: str = "sudoku"):
    """The RunSpec of the tiny scale's H*=1 esopt run of `experiment`, on a local model
    directory."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config.update(yaml.safe_load((ROOT / "config/scales/tiny.yaml").read_text()) or {})
    config["model"] = model
    spec = next(s for s in run_specs(config)
                if s.experiment == experiment and s.horizon == 1 and s.method == "esopt")
    return spec


def matmul_ceiling(seconds: float = 1.0, dtype: torch.dtype = torch.float32) -> float:
    """Best matmul GFLOP/s in `dtype` over the model's projection shapes (M = 512 rows)."""
    best = 0.0
    for k, n in ((576, 1536), (1536, 576), (576, 576)):
        x, w = torch.randn(512, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        for _ in range(3):
            x @ w
        t0, reps = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            x @ w
            reps += 1
        best = max(best, 2 * 512 * k * n * reps / (time.perf_counter() - t0) / 1e9)
    return best


class ForwardMeter:
    """Times the model's forward calls (prefill: more than one new token; decode: one) and
    counts the FLOPs of the real (unpadded) tokens they process."""

    def __init__(self, model):
        cfg = model.config
        self.vocab_flops = 2 * cfg.vocab_size * cfg.hidden_size
        n = sum(p.numel() for p in model.parameters())
        self.body_flops = 2 * (n - cfg.vocab_size * cfg.hidden_size)  # embedding: a lookup
        self.attn = 4 * cfg.num_hidden_layers * cfg.hidden_size
        self.model, self.original = model, model.forward
        # transformers inspects forward's signature (the cache argument's name).
        self.__signature__ = inspect.signature(model.forward)
        self.reset()
        model.forward = self

    def reset(self):
        self.prefill_s = self.decode_s = self.flops = 0.0
        self.tokens = self.padded = 0

    def __call__(self, *args, **kwargs):
        ids = kwargs["input_ids"]
        t0 = time.perf_counter()
        out = self.original(*args, **kwargs)
        dt = time.perf_counter() - t0
        mask = kwargs.get("attention_mask")
        real = int(mask[:, -ids.shape[1]:].sum()) if mask is not None else ids.numel()
        context = mask.shape[1] if mask is not None else ids.shape[1]
        rows = out.logits.shape[0] * out.logits.shape[1]
        self.flops += real * (self.body_flops + self.attn * context) + rows * self.vocab_flops
        self.tokens += real
        self.padded += ids.numel() - real
        if ids.shape[1] > 1:
            self.prefill_s += dt
        else:
            self.decode_s += dt
        return out


def signature(per_direction):
    return [[(e.task_seed, e.reward, tuple(t.completion for t in e.turns)) for e in eps]
            for eps in per_direction]


def run_path(name, policy, meter, spec, directions, ceiling):
    make = lambda: make_env(spec.env, **spec.env_kwargs)  # noqa: E731
    seeds, sampling = train_tasks(spec, 0), train_sampling(spec, 0)
    meter.reset()
    t0 = time.perf_counter()
    if name == "population":
        per_direction = run_population_episodes(policy, directions, make, seeds, sampling)
    else:
        per_direction = []
        for d in directions:
            with policy.perturbed(d):
                per_direction.append(run_episodes(policy, make, seeds, sampling))
    wall = time.perf_counter() - t0
    eps = [e for d in per_direction for e in d]
    prompt = sum(e.prompt_tokens for e in eps)
    gen = sum(e.completion_tokens for e in eps)
    model_s = meter.prefill_s + meter.decode_s
    row = {
        "path": name, "wall_s": round(wall, 1), "episodes": len(eps),
        "episodes_per_s": round(len(eps) / wall, 3),
        "prompt_tok_per_s": round(prompt / wall, 1),
        "generated_tok_per_s": round(gen / wall, 2),
        "prompt_tokens": prompt, "generated_tokens": gen,
        "executed_tokens": meter.tokens, "padding_tokens": meter.padded,
        "prefill_s": round(meter.prefill_s, 1), "decode_s": round(meter.decode_s, 1),
        "other_s": round(wall - model_s, 1),
        "gflop_per_s": round(meter.flops / wall / 1e9, 1),
        "gflop_per_s_in_forward": round(meter.flops / model_s / 1e9, 1),
        "fraction_of_matmul_ceiling": round(meter.flops / wall / 1e9 / ceiling, 3),
        "rewards": [round(sum(e.reward for e in d) / len(d), 3) for d in per_direction],
    }
    return row, signature(per_direction)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", help="model directory (default: found or fetched by bench_model.py)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--experiment", default="sudoku", choices=("sudoku", "countdown"),
                    help="the tiny all's experiment whose generation is scored")
    ap.add_argument("--directions", type=int, default=0, help="first k directions (0: all G)")
    ap.add_argument("--levers", action="store_true", help="also the intermediate paths")
    ap.add_argument("--greedy", action="store_true", help="temperature 0 instead of 0.7")
    ap.add_argument("--paths", nargs="+", choices=PATHS, help="paths to run (first = reference)")
    args = ap.parse_args()
    args.model = smollm2_dir(args.model)
    torch.set_num_threads(args.threads)
    spec = tiny_spec(args.model, args.experiment)
    if args.greedy:
        spec = replace(spec, train_decoder=replace(spec.train_decoder, temperature=0.0))
    es = ES(spec.es)
    directions = es.ask(es.state_at(0))[: args.directions or None]
    ceiling = matmul_ceiling()
    paths = args.paths or (list(PATHS) if args.levers else ["before", "population"])
    rows, sigs = [], {}
    for name in paths:
        policy = HFPolicy.load(args.model, decoder="generate" if name == "before" else "loop",
                               serving_dtype=SERVING.get(name, "float32"))
        meter = ForwardMeter(policy.model)
        if name == "loop":
            policy.rollout_session = None  # no kept prefix: encoded again every turn
        row, sigs[name] = run_path(name, policy, meter, spec, directions, ceiling)
        rows.append(row)
        del policy, meter
    base = rows[0]["wall_s"]
    ref = "loop+kv" if "loop+kv" in sigs and not args.greedy else paths[0]
    print(f"threads {args.threads}, matmul ceiling {ceiling:.1f} GFLOP/s, "
          f"G={len(directions)} x {spec.tasks_per_direction} tasks, decoder "
          f"T={spec.train_decoder.temperature} top_p={spec.train_decoder.top_p} "
          f"top_k={spec.train_decoder.top_k} max_new={spec.train_decoder.max_new_tokens}")
    for row in rows:
        same = sum(a == b for da, db in zip(sigs[ref], sigs[row["path"]], strict=True)
                   for a, b in zip(da, db, strict=True))
        row["speedup_vs_before"] = round(base / row["wall_s"], 2)
        row[f"episodes_equal_to_{ref}"] = f"{same}/{row['episodes']}"
        print(json.dumps(row))


if __name__ == "__main__":
    main()
