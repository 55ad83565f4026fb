#!/usr/bin/env bash
# GPU check (< 10 min on one GPU with vLLM installed). First the noise: the committed golden
# vectors and a 4M-element draw computed on CUDA must equal the CPU's bit for bit (noise
# spec 2 promises that). Then the RL baselines: one GRPO and one PPO step of a tiny random
# model (the model's tokenizer) served in bf16 on CUDA, checking that every forward gets
# its tensors on the model's device and that a 1e-6 step moves the float32 master. Then
# the vLLM backend: one ES generation on a small model inside vLLM, printing generated
# tokens/s and peak GPU memory of the ES generation against plain inference of the same
# rollouts.
#   bash benchmarks/gpu_check.sh [model dir or Hub id, default Qwen/Qwen2.5-0.5B-Instruct]
# ESOPT_GPU_CHECK_CPU=1 runs the same steps small (4 puzzles, G=4, float32, peak RSS for
# memory; the RL steps still bf16) on the CPU build of vLLM, to check the script itself
# where there is no GPU:
#   ESOPT_GPU_CHECK_CPU=1 PYTHON=.venv-vllm/bin/python bash benchmarks/gpu_check.sh \
#     resources/models/smollm2-135m-instruct
# ESOPT_GPU_CHECK_PARTS picks the parts (default "noise rl vllm"); "noise rl" needs no vLLM.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-Qwen/Qwen2.5-0.5B-Instruct}
PY=${PYTHON:-python}
PARTS=" ${ESOPT_GPU_CHECK_PARTS:-noise rl vllm} "
if [[ $PARTS == *" noise "* ]]; then
timeout 120 "$PY" - <<'PY'
import json, os, sys, torch
from esopt.es import philox
from esopt.es.noise import draw, stream_key

cpu = os.environ.get("ESOPT_GPU_CHECK_CPU") == "1"
if not cpu and not torch.cuda.is_available():
    sys.exit("gpu_check: no CUDA device (ESOPT_GPU_CHECK_CPU=1 runs the CPU dry run)")
device = "cpu" if cpu else "cuda"
bits = lambda t: t.cpu().contiguous().view(torch.int32).tolist()
golden = json.load(open("tests/es/noise_golden.json"))
for c in golden["cases"]:
    offsets = torch.arange(c["start"], c["start"] + c["count"], device=device)
    got = [f"{v & 0xFFFFFFFF:08x}" for v in bits(philox.normals_at(offsets, stream_key(c["seed"], c["name"])))]
    assert got == c["float32_bits"].split(), f"golden vector {c['name']}@{c['start']} differs on {device}"
n = 1 << 22
# The tensor-op definition on the device (what draw(device="cuda") runs) vs the CPU loop.
on_device = philox.normals_at(torch.arange(12345, 12345 + n, device=device),
                              stream_key(3, "model.layers.0.mlp.down_proj.weight"))
on_cpu = draw(3, "model.layers.0.mlp.down_proj.weight", 12345, n)
same = torch.equal(on_device.cpu().view(torch.int32), on_cpu.view(torch.int32))
assert same, f"noise on {device} differs from the CPU's in {(on_device.cpu() != on_cpu).sum()} of {n}"
print(f"noise on {device} ({torch.__version__}): {len(golden['cases'])} golden vectors and "
      f"{n} elements bit-identical to the CPU loop")
PY
fi
if [[ $PARTS == *" rl "* ]]; then
timeout 240 "$PY" - "$MODEL" <<'PY'
import os, sys, tempfile, time, torch
from esopt.chat import SamplingParams
from esopt.backends.hf import HFPolicy
from esopt.baselines.grpo import GRPOConfig, GRPOTrainer
from esopt.baselines.ppo import PPOConfig, PPOTrainer
from esopt.envs.base import Environment, StepResult, register
from esopt.models import fetch_hub_model, make_tiny_model
from esopt.runtime.memory import peak_memory_mb

cpu = os.environ.get("ESOPT_GPU_CHECK_CPU") == "1"
if not cpu and not torch.cuda.is_available():
    sys.exit("gpu_check: no CUDA device (ESOPT_GPU_CHECK_CPU=1 runs the CPU dry run)")
device = "cpu" if cpu else "cuda"


@register("gpu_check_varied")
class Varied(Environment):
    """Two turns; reward = share of distinct characters written, so a group's rewards
    differ and the step has a gradient."""
    max_turns, max_new_tokens = 2, 8

    def reset(self, seed):
        self.seen, self.turn = set(), 0
        return [{"role": "user", "content": f"Say something ({seed})."}]

    def step(self, completion):
        self.turn += 1
        self.seen |= set(completion)
        obs = [{"role": "user", "content": "Say something."},
               {"role": "assistant", "content": completion},
               {"role": "user", "content": "More."}]
        done = self.turn >= 2
        return StepResult(obs, len(self.seen) / 20 if done else 0.0, done, {})


src = sys.argv[1]
tok_dir = src if os.path.exists(src) else str(
    fetch_hub_model(src, "resources/models/hub/" + src.replace("/", "--")))
tiny = make_tiny_model(tempfile.mkdtemp(prefix="gpu_check_tiny_"), tok_dir)
decoder = SamplingParams(max_new_tokens=8, temperature=1.0)
trainers = {"GRPO": lambda p: GRPOTrainer(p, GRPOConfig(group_size=4, lr=1e-6,
                                                         train_decoder=decoder)),
            "PPO": lambda p: PPOTrainer(p, PPOConfig(episodes_per_task=4, lr=1e-6,
                                                     train_decoder=decoder))}
for name, make in trainers.items():
    policy = HFPolicy.load(tiny, serving_dtype="bfloat16", device=device)
    start = {n: t.clone() for n, t in policy.master.items()}
    trainer = make(policy)
    dev = torch.device(device)
    seen = []

    def on_device(module, args, kwargs):
        for key in ("input_ids", "attention_mask"):
            t = kwargs.get(key)
            if t is not None:
                assert t.device.type == dev.type, f"{name}: {key} on {t.device}, model on {dev}"
                seen.append(key)

    for model in (trainer.model, trainer.reference):
        model.register_forward_pre_hook(on_device, with_kwargs=True)
    head = list(trainer.head.parameters()) if hasattr(trainer, "head") else []
    held = trainer.train_params + head  # what the optimiser steps: float32, on the device
    assert all(t.device.type == dev.type and t.dtype == torch.float32 for t in held), name
    t0 = time.perf_counter()
    stats = trainer.step("gpu_check_varied", {}, [0, 1])
    secs = time.perf_counter() - t0
    diff = [(policy.master[n] - start[n]).abs() for n in trainer.names]
    moved = sum(int((d > 0).sum()) for d in diff)
    largest = max(float(d.max()) for d in diff)
    assert seen and moved > 0 and largest < 1.5e-6, (name, moved, largest)
    for n, p in zip(trainer.names, trainer.params, strict=True):
        assert p.dtype == torch.bfloat16 and p.device.type == dev.type, n
        assert torch.equal(p.detach().cpu(), policy.master[n].to(torch.bfloat16)), n
    print(f"{name} step on {device} (bf16 serving, float32 master): loss {stats['loss']:.4f}, "
          f"{stats['tokens']} trained tokens, {moved} float32 elements moved by <= "
          f"{largest:.2e} at lr 1e-6, {len(seen)} forward inputs on {device}, {secs:.1f} s, "
          f"peak {peak_memory_mb():.0f} MiB")
PY
fi
if [[ $PARTS == *" vllm "* ]]; then
  # A file, not a heredoc: vLLM spawns its engine, which re-imports the main module.
  timeout 470 "$PY" benchmarks/gpu_check_vllm.py "$MODEL"
fi
