"""Peak memory of one ES generation vs one Agentic GRPO (and PPO) step on the same batch.

On SmolLM2-135M (float32, CPU), each measured in its own child process (peak memory is a
high-water mark, so one process per measurement; RSS on CPU, the CUDA allocator's peak on
a GPU, as the pipeline's ledgers): the ES generation perturbs, plays the batch and
restores for each of G directions, then applies the update; the GRPO step plays the same
number of episodes (tasks x group), scores them with the frozen reference, backpropagates
(micro-batches of 8 sequences) and steps AdamW; PPO adds a float32 critic (the model's
body and a value head, with its gradients and AdamW moments) and its scoring pass.
Prints the peaks and their ratios to ES.

    python benchmarks/memory.py [--model DIR] [--tasks 2] [--group 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from bench_model import smollm2_dir

ENV = ("sudoku", {"size": 4, "blanks": 1, "few_shot": 1, "action_format": "cell"})
DECODER = {"max_new_tokens": 8, "temperature": 0.7, "top_p": 0.8, "top_k": 20}


def child(model: str, mode: str, tasks: int, group: int) -> None:
    import torch

    from esopt.backends.hf import HFPolicy
    from esopt.chat import SamplingParams
    from esopt.runtime.memory import peak_memory_mb

    torch.set_num_threads(2)
    policy = HFPolicy.load(model)
    loaded = peak_memory_mb()
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
    elif mode == "grpo":
        from esopt.baselines.grpo import GRPOConfig, GRPOTrainer

        trainer = GRPOTrainer(policy, GRPOConfig(group_size=group, lr=1e-6,
                                                 train_decoder=SamplingParams(**DECODER)))
        trainer.step(ENV[0], ENV[1], list(range(tasks)))
    else:
        from esopt.baselines.ppo import PPOConfig, PPOTrainer

        trainer = PPOTrainer(policy, PPOConfig(episodes_per_task=group, lr=1e-6,
                                               train_decoder=SamplingParams(**DECODER)))
        trainer.step(ENV[0], ENV[1], list(range(tasks)))
    print(json.dumps({"peak_mb": peak_memory_mb(), "loaded_mb": loaded,
                      "seconds": time.perf_counter() - t0}))


def measure(model: str, mode: str, tasks: int, group: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--model", model, "--child", mode,
                          "--tasks", str(tasks), "--group", str(group)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model directory (default: found or fetched by bench_model.py)")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--child", choices=("es", "grpo", "ppo"))
    args = ap.parse_args()
    args.model = smollm2_dir(args.model)
    if args.child:
        child(args.model, args.child, args.tasks, args.group)
        return
    es = measure(args.model, "es", args.tasks, args.group)
    print(f"model {args.model}; ES: {args.group} directions x {args.tasks} episodes; "
          f"GRPO: group {args.group} x {args.tasks} tasks; PPO: {args.group} episodes x "
          f"{args.tasks} tasks")
    print(f"ES generation   peak {es['peak_mb']:8.0f} MB (after load {es['loaded_mb']:.0f}), "
          f"{es['seconds']:.1f} s")
    for mode in ("grpo", "ppo"):
        rl = measure(args.model, mode, args.tasks, args.group)
        above = (rl["peak_mb"] - rl["loaded_mb"]) / max(1.0, es["peak_mb"] - es["loaded_mb"])
        print(f"{mode.upper():4} step       peak {rl['peak_mb']:8.0f} MB (after load "
              f"{rl['loaded_mb']:.0f}), {rl['seconds']:.1f} s; ratio {mode.upper()} / ES = "
              f"{rl['peak_mb'] / es['peak_mb']:.2f}, growth above the loaded model "
              f"{above:.2f}x ES's")

if __name__ == "__main__":
    main()
