"""What one unit of each method's Countdown training costs (scale=tiny-compare's settings):
an ES direction (16 tasks), a GRPO step and a PPO step (4 tasks x 4 rollouts each), in
seconds and in ledger FLOPs, in one process. The wall time per FLOP of each is what sizes a
run at matched training FLOPs (esopt.pipeline.budget). The model: bench_model.py.

    python benchmarks/countdown_costs.py [--threads 2] [--model DIR]
        [--serving-dtypes float32 bfloat16-weights] [--units es grpo ppo]
        [--micro-batches 8 16]

With two serving dtypes, each unit runs in both, back to back in the same process, so their
ratio is measured under the same load. With several micro-batch sizes, each RL step runs in
each (the batch of a step is the same; only how much of it one forward/backward holds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch
import yaml

from bench_model import smollm2_dir
from esopt.backends.factory import load_policy
from esopt.es.strategy import ES
from esopt.pipeline.config import merge_config, run_specs
from esopt.pipeline.objective import score_direction
from esopt.pipeline.rl import make_trainer, rl_tasks
from esopt.runtime.ledger import ModelShape, rollout_flops

REPO = Path(__file__).resolve().parents[1]


def specs(model: str) -> dict:
    cfg = merge_config(yaml.safe_load((REPO / "config/config.yaml").read_text()),
                       yaml.safe_load((REPO / "config/scales/tiny-compare.yaml").read_text()))
    cfg["model"] = model
    return {(s.method, s.seed): s for s in run_specs(cfg)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", help="model directory (default: found or fetched by "
                                    "bench_model.py)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--es-reps", type=int, default=2)
    ap.add_argument("--grpo-steps", type=int, default=3)
    ap.add_argument("--ppo-steps", type=int, default=2)
    ap.add_argument("--serving-dtypes", nargs="+", default=["float32"],
                    choices=["float32", "bfloat16-weights"])
    ap.add_argument("--units", nargs="+", default=["es", "grpo", "ppo"],
                    choices=["es", "grpo", "ppo"])
    ap.add_argument("--micro-batches", nargs="+", type=int, default=[],
                    help="RL micro-batch sizes to time (default: the scale's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    by = specs(smollm2_dir(args.model))
    rows = []
    for dtype in args.serving_dtypes:
        if "es" in args.units:
            rows += es_direction_costs(by[("esopt", 0)], dtype, args.es_reps)
        for method, steps in (("grpo", args.grpo_steps), ("ppo", args.ppo_steps)):
            if method not in args.units:
                continue
            spec = by[(method, 0)]
            for mb in args.micro_batches or [spec.rl.micro_batch]:
                rows += rl_step_costs(dataclasses.replace(
                    spec, rl=dataclasses.replace(spec.rl, micro_batch=mb)), dtype, steps)
    units = sorted({(r["unit"], r.get("micro_batch", 0)) for r in rows})
    for dtype in args.serving_dtypes:
        for unit, mb in units:
            mine = [r for r in rows if r["unit"] == unit and r["dtype"] == dtype
                    and r.get("micro_batch", 0) == mb]
            if not mine:
                continue
            if mb:
                unit = f"{unit} (micro-batch {mb})"
            warm = mine[1:] or mine
            s = sum(r["s"] for r in warm) / len(warm)
            flops = sum(r["flops"] for r in warm) / len(warm)
            print(f"{unit} [{dtype}]: {s:.1f} s, {flops / 1e12:.2f} TFLOPs, "
                  f"{flops / s / 1e9:.0f} GFLOP/s, {s / warm[0]['episodes']:.2f} s per episode "
                  "(after the first)")


def es_direction_costs(spec, dtype: str, reps: int) -> list[dict]:
    """One ES direction of the spec's tasks, `reps` times (the first also warms up)."""
    rows = []
    policy, _ = load_policy(spec.model, "hf", dtype, {})
    direction = ES(spec.es).ask(ES(spec.es).state_at(0))[0]
    for _ in range(reps):
        t0 = time.perf_counter()
        episodes, _ = score_direction(policy, spec, 0, direction)
        rows.append({"unit": "es direction", "dtype": dtype, "s": time.perf_counter() - t0,
                     "episodes": len(episodes),
                     "flops": rollout_flops(ModelShape.of_policy(policy), episodes)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def rl_step_costs(spec, dtype: str, steps: int) -> list[dict]:
    """`steps` training steps of the spec's RL method from the base model."""
    rows = []
    policy, _ = load_policy(spec.model, "hf", dtype, {})
    trainer = make_trainer(spec, policy)
    for k in range(steps):
        t0 = time.perf_counter()
        stats = trainer.step(spec.env, spec.env_kwargs, rl_tasks(spec, k))
        rows.append({"unit": f"{spec.method} step", "dtype": dtype,
                     "micro_batch": spec.rl.micro_batch, "s": time.perf_counter() - t0,
                     "episodes": stats["episodes"],
                     "flops": stats["flops"], "generate_s": stats["generate_s"],
                     "score_s": stats["score_s"], "update_s": stats["update_s"]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
