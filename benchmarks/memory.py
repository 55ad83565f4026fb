"""Peak memory of one ES generation vs one Agentic GRPO step on the same batch.

On SmolLM2-135M (float32, CPU), each measured in its own child process (peak RSS is a
high-water mark, so one process per measurement): the ES generation perturbs, plays the
batch and restores for each of G directions, then applies the update; the GRPO step plays
the same number of episodes (tasks x group), re-scores them with the trained model and
its frozen reference, backpropagates and steps AdamW. Prints both peaks and their ratio.

    python benchmarks/memory.py [--model DIR] [--tasks 2] [--group 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ENV = ("sudoku", {"size": 4, "blanks": 1, "few_shot": 1, "action_format": "cell"})
DECODER = {"max_new_tokens": 8, "temperature": 0.7, "top_p": 0.8, "top_k": 20}


def child(model: str, mode: str, tasks: int, group: int) -> None:
    import torch

    from esopt.backends.base import SamplingParams
    from esopt.backends.hf import HFPolicy
    from esopt.runtime.memory import peak_rss_mb

    torch.set_num_threads(2)
    policy = HFPolicy.load(model)
    loaded = peak_rss_mb()
    t0 = time.perf_counter()
    if mode == "es":
        from esopt.agent.rollout import run_episodes
        from esopt.envs import make_env
        from esopt.es.strategy import ES, ESConfig

        es = ES(ESConfig(population_size=group, alpha=1e-3))
        state = es.init()
        rewards = []  # G = group directions x tasks episodes: GRPO's tasks x group
        for d in es.ask(state):
            with policy.perturbed(d):
                eps = run_episodes(policy, lambda: make_env(ENV[0], **ENV[1]),
                                   list(range(tasks)), SamplingParams(**DECODER))
            rewards.append(sum(e.reward for e in eps))
        update, _ = es.tell(state, rewards)
        policy.apply(update)
    else:
        from esopt.baselines.grpo import GRPOConfig, GRPOTrainer

        trainer = GRPOTrainer(policy, GRPOConfig(group_size=group, lr=1e-6,
                                                 train_decoder=SamplingParams(**DECODER)))
        trainer.step(ENV[0], ENV[1], list(range(tasks)))
    print(json.dumps({"peak_mb": peak_rss_mb(), "loaded_mb": loaded,
                      "seconds": time.perf_counter() - t0}))


def measure(model: str, mode: str, tasks: int, group: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--model", model, "--child", mode,
                          "--tasks", str(tasks), "--group", str(group)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(Path(os.environ.get(
        "ESOPT_TEST_CACHE", Path.home() / ".cache/esopt")) / "models/smollm2-135m-instruct"))
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--child", choices=("es", "grpo"))
    args = ap.parse_args()
    if args.child:
        child(args.model, args.child, args.tasks, args.group)
        return
    es = measure(args.model, "es", args.tasks, args.group)
    grpo = measure(args.model, "grpo", args.tasks, args.group)
    print(f"model {args.model}; {args.tasks} tasks; ES: {args.group} directions x "
          f"{args.tasks} episodes; GRPO: group {args.group} x {args.tasks} tasks")
    print(f"ES generation   peak RSS {es['peak_mb']:8.0f} MB (after load {es['loaded_mb']:.0f}),"
          f" {es['seconds']:.1f} s")
    print(f"GRPO step       peak RSS {grpo['peak_mb']:8.0f} MB (after load "
          f"{grpo['loaded_mb']:.0f}), {grpo['seconds']:.1f} s")
    above = (grpo["peak_mb"] - grpo["loaded_mb"]) / max(1.0, es["peak_mb"] - es["loaded_mb"])
    print(f"peak ratio GRPO / ES = {grpo['peak_mb'] / es['peak_mb']:.2f}; "
          f"growth above the loaded model, GRPO / ES = {above:.2f}")


if __name__ == "__main__":
    main()
