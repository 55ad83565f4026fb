"""Batched vs one-at-a-time rollouts on SmolLM2-135M, and the base model's Sudoku success.

    python benchmarks/rollout.py [--model DIR] [--episodes 32] [--single 8]

Throughput: the same Sudoku episodes (tiny-scale board) run in lockstep (one generate
per turn for all live episodes) and one at a time; generated tokens/s of each and their
ratio. Base success: the evaluation decoder (temperature 0.7, top-p 0.8, top-k 20) on
held-out boards for each H* of the tiny scale, and greedy for reference.
"""

from __future__ import annotations

import argparse
import json
import time

from bench_model import smollm2_dir
from esopt.agent.evaluate import EVAL_SAMPLING, evaluate, task_seeds
from esopt.agent.rollout import run_episodes
from esopt.backends.hf import HFPolicy
from esopt.chat import SamplingParams
from esopt.envs import make_env

TINY_SUDOKU = dict(size=4, few_shot=1, action_format="cell")


def token_counts(episodes) -> tuple[int, int]:
    """(generated tokens, prompt + generated tokens) over a list of episodes."""
    gen = sum(e.completion_tokens for e in episodes)
    total = gen + sum(e.prompt_tokens for e in episodes)
    return gen, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", help="model directory (default: found or fetched by bench_model.py)")
    ap.add_argument("--episodes", type=int, default=32)
    ap.add_argument("--single", type=int, default=8, help="episodes run one at a time")
    ap.add_argument("--blanks", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--eval-tasks", type=int, default=32)
    args = ap.parse_args()
    args.model = smollm2_dir(args.model)
    policy = HFPolicy.load(args.model)
    make = lambda: make_env("sudoku", blanks=2, **TINY_SUDOKU)  # noqa: E731
    seeds = task_seeds("bench", args.episodes)
    greedy = SamplingParams()

    t0 = time.perf_counter()
    batched = run_episodes(policy, make, seeds, greedy)
    batched_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    single = [run_episodes(policy, make, [s], greedy)[0] for s in seeds[: args.single]]
    single_s = time.perf_counter() - t0
    b_gen, b_all = token_counts(batched)
    s_gen, s_all = token_counts(single)
    report = {
        "board": "4x4, H*=2, 1 few-shot example, cell actions",
        "batched_episodes": len(batched), "batched_s": round(batched_s, 1),
        "batched_generated_tok_per_s": round(b_gen / batched_s, 1),
        "batched_all_tok_per_s": round(b_all / batched_s, 1),
        "single_episodes": len(single), "single_s": round(single_s, 1),
        "single_generated_tok_per_s": round(s_gen / single_s, 1),
        "single_all_tok_per_s": round(s_all / single_s, 1),
        "speedup_generated_tok_per_s": round((b_gen / batched_s) / (s_gen / single_s), 2),
    }
    eval_seeds = task_seeds("test", args.eval_tasks)
    for blanks in args.blanks:
        for name, sampling in (("eval_decoder", EVAL_SAMPLING), ("greedy", greedy)):
            t0 = time.perf_counter()
            _, summary = evaluate(policy, "sudoku", dict(blanks=blanks, **TINY_SUDOKU),
                                  eval_seeds, repeats=1, sampling=sampling)
            report[f"base_success_H{blanks}_{name}"] = round(summary.success_mean, 3)
            report[f"eval_s_H{blanks}_{name}"] = round(time.perf_counter() - t0, 1)
    for k, v in report.items():
        print(f"{k:40s} {v}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
