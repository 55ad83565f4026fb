#!/usr/bin/env bash
# GPU check of the vLLM backend (< 10 min on one GPU with vLLM installed): one ES
# generation on a small model inside vLLM, printing generated tokens/s and peak GPU memory
# of the ES generation against plain inference of the same rollouts.
#   bash benchmarks/gpu_check.sh [model dir or Hub id, default Qwen/Qwen2.5-0.5B-Instruct]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-Qwen/Qwen2.5-0.5B-Instruct}
PY=${PYTHON:-python}
timeout 590 "$PY" - "$MODEL" <<'PY'
import sys, time, torch
from esopt.backends.base import SamplingParams
from esopt.backends.vllm import VLLMPolicy
from esopt.envs.base import make_env
from esopt.es.strategy import ES, ESConfig
from esopt.es.schedules import SigmaSchedule
from esopt.models import fetch_hub_model

src = sys.argv[1]
path = src if "/" not in src or src.startswith((".", "/")) else str(fetch_hub_model(src, "resources/models/hub/" + src.replace("/", "--")))
policy = VLLMPolicy.load(path, serving_dtype="bfloat16", gpu_memory_utilization=0.5, max_model_len=4096)
convs = [make_env("sudoku", size=4, blanks=2, few_shot=1, action_format="cell").reset(s) for s in range(32)]
sampling = SamplingParams(max_new_tokens=64, temperature=0.7, top_p=0.8, top_k=20)

def used_gib():
    # Device-wide (the engine's workers are other processes); vLLM reserves its KV cache
    # up front, so equal numbers mean ES adds no GPU memory to inference.
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30

def rollout():
    t0 = time.perf_counter()
    out = policy.generate(convs, sampling)
    return sum(c.completion_tokens for c in out), time.perf_counter() - t0

rollout()  # warm-up
tokens, secs = rollout()
plain_gib = used_gib()
print(f"plain inference: {tokens / secs:.0f} tok/s (batch 32), GPU memory in use {plain_gib:.2f} GiB")
es = ES(ESConfig(population_size=8, alpha=5e-4, sigma=SigmaSchedule("constant", 1e-3, 1e-3, 1)))
state = es.init()
t0, gen_tokens, rewards, peak_gib = time.perf_counter(), 0, [], plain_gib
for d in es.ask(state):
    with policy.perturbed(d):
        n, _ = rollout()
        peak_gib = max(peak_gib, used_gib())
        gen_tokens += n
        rewards.append(float(n))
update, _ = es.tell(state, rewards)
policy.apply(update)
secs = time.perf_counter() - t0
print(f"ES generation (G=8 x 32 rollouts): {gen_tokens / secs:.0f} tok/s including perturb/"
      f"restore, {secs:.1f} s; peak GPU memory in use {max(peak_gib, used_gib()):.2f} GiB "
      f"= {max(peak_gib, used_gib()) / plain_gib:.2f}x plain inference")
PY
