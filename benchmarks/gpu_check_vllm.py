"""The vLLM part of benchmarks/gpu_check.sh: one ES generation on a small model inside
vLLM, tokens/s and peak memory against plain inference of the same rollouts (see there).
A script with a main guard: vLLM spawns its engine core, which re-imports this module."""

import os
import sys
import time
from functools import partial

import torch

from esopt.agent.rollout import run_episodes
from esopt.backends.vllm import VLLMPolicy
from esopt.chat import SamplingParams
from esopt.envs.base import make_env
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig
from esopt.models import fetch_hub_model
from esopt.runtime.memory import peak_rss_mb


def main() -> None:
    cpu = os.environ.get("ESOPT_GPU_CHECK_CPU") == "1"
    if not cpu and not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device (ESOPT_GPU_CHECK_CPU=1 runs the CPU dry run)")
    n_tasks, G = (4, 4) if cpu else (32, 8)
    engine = (dict(serving_dtype="float32", kv_cache_memory_bytes=1 << 30, max_model_len=2048)
              if cpu else dict(serving_dtype="bfloat16", gpu_memory_utilization=0.5,
                               max_model_len=4096))

    src = sys.argv[1]
    path = src if os.path.exists(src) else str(
        fetch_hub_model(src, "resources/models/hub/" + src.replace("/", "--")))
    policy = VLLMPolicy.load(path, **engine)
    sudoku = partial(make_env, "sudoku", size=4, blanks=2, max_turns=2, few_shot=1,
                     reward="cells", action_format="cell")
    sampling = SamplingParams(max_new_tokens=32 if cpu else 64, temperature=0.7, top_p=0.8,
                              top_k=20)

    def used_gib():
        if cpu:
            return peak_rss_mb() / 2**10
        # Device-wide (the engine's workers are other processes); vLLM reserves its KV cache
        # up front, so equal numbers mean ES adds no GPU memory to inference.
        free, total = torch.cuda.mem_get_info()
        return (total - free) / 2**30

    def rollout():
        """Sudoku episodes on n_tasks puzzles: (generated tokens, mean reward, seconds)."""
        t0 = time.perf_counter()
        eps = run_episodes(policy, sudoku, range(n_tasks), sampling)
        return (sum(e.completion_tokens for e in eps), sum(e.reward for e in eps) / len(eps),
                time.perf_counter() - t0)

    rollout()  # warm-up
    tokens, _, secs = rollout()
    plain_gib = used_gib()
    where = "peak RSS" if cpu else "GPU memory in use"
    print(f"plain inference: {tokens / secs:.0f} tok/s (batch {n_tasks}), {where} "
          f"{plain_gib:.2f} GiB")
    # sigma 3e-3 as config/config.yaml (1e-3 leaves small models' rewards all equal).
    es = ES(ESConfig(population_size=G, alpha=1e-3,
                     sigma=SigmaSchedule("constant", 3e-3, 3e-3, 1)))
    state = es.init()
    t0, gen_tokens, rewards, peak_gib = time.perf_counter(), 0, [], plain_gib
    for d in es.ask(state):
        with policy.perturbed(d):
            n, reward, _ = rollout()
            peak_gib = max(peak_gib, used_gib())
            gen_tokens += n
            rewards.append(reward)
    update, _ = es.tell(state, rewards)
    policy.apply(update)
    secs = time.perf_counter() - t0
    peak_gib = max(peak_gib, used_gib())
    print(f"ES generation (G={G} x {n_tasks} episodes): {gen_tokens / secs:.0f} tok/s including "
          f"perturb/restore/update, {secs:.1f} s, mean rewards {[round(r, 2) for r in rewards]}; "
          f"{where} {peak_gib:.2f} GiB = {peak_gib / plain_gib:.2f}x plain inference")


if __name__ == "__main__":
    main()
