"""ES primitives on SmolLM2-135M, as ratios to the memory-bandwidth/RNG floor, in one run.

    python benchmarks/es_primitives.py [--model DIR] [--G 8] [--reps 5] [--threads 1]

Floor: `torch.randn` of as many float32 numbers as the model has parameters, plus one
`add_` of a precomputed tensor over the same bytes. Perturb must draw and add the same
numbers, so perturb/floor is the overhead of chunking and per-tensor seeding. Restore is
compared with a plain copy of the weights; update (G directions) with G draws + G adds.
Peak memory: a child process runs a plain `generate`, another the same `generate` inside
`perturbed()`; the ratio of their peak RSS is the memory price of exact restore.
Noise: numbers/s of esopt's counter-based generator (esopt.es.noise, one thread) against
`torch.randn` on the same count, and the peak memory of one tensor-parallel rank drawing
its shard of a 27B-sized row-parallel matrix (5120 x 17408, TP=4) against drawing the whole
tensor and slicing it (each in a fresh child process).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch

from bench_model import smollm2_dir
from esopt.backends.hf import HFPolicy
from esopt.chat import SamplingParams
from esopt.es.noise import DEFAULT_CHUNK_BLOCKS, NOISE_BLOCK, draw, noise_chunks
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig
from esopt.runtime.memory import peak_rss_mb

PROMPTS = [[{"role": "user", "content": f"What is {a} + {b}? Answer with a number."}]
           for a, b in [(2, 3), (3, 4), (10, 5), (7, 8), (1, 9), (6, 6), (4, 2), (8, 3)]]


def timed(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)  # the least-disturbed run: this machine is shared


def peak_rss_child(model: str, mode: str) -> float:
    """Peak RSS (MB) of a fresh process that loads the model and generates once."""
    out = subprocess.run([sys.executable, __file__, "--model", model, "--child", mode],
                         check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


TP_SHAPE, TP_SIZE = (5120, 17408), 4  # Qwen-27B-like down_proj: 356 MB of float32 noise


def tp_draw_child(mode: str) -> None:
    """Peak RSS growth (MB) of rank 0's noise for its column shard of TP_SHAPE."""
    from esopt.es.noise import region_chunks, tensor_noise

    cols = TP_SHAPE[1] // TP_SIZE
    region = (slice(None), slice(0, cols))
    draw(1, "probe", 0, 4)  # compile/load the kernel before the baseline
    base = peak_rss_mb()
    if mode == "sliced":
        for _ in region_chunks(7, "down_proj.weight", TP_SHAPE, region):
            pass
    else:
        tensor_noise(7, "down_proj.weight", TP_SHAPE)[region].contiguous()
    print(peak_rss_mb() - base)


def child(model: str, mode: str) -> None:
    sampling = SamplingParams(max_new_tokens=32)
    if mode == "plain":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        m = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(model)
        policy = HFPolicy(m, tok, keep_master=False)  # generation only: no master copy
        policy.generate(PROMPTS, sampling)
    else:
        policy = HFPolicy.load(model)
        es = ES(ESConfig(population_size=2, sigma=SigmaSchedule("constant", 1e-3, 1e-3, 1)))
        with policy.perturbed(es.ask(es.init())[0]):
            policy.generate(PROMPTS, sampling)
    print(peak_rss_mb())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", help="model directory (default: found or fetched by bench_model.py)")
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (the noise loop and torch.randn are single-threaded)")
    ap.add_argument("--child", choices=["plain", "perturbed", "tp-sliced", "tp-whole"])
    args = ap.parse_args()
    if args.child:
        if args.child.startswith("tp-"):
            return tp_draw_child(args.child[3:])
        return child(args.model, args.child)
    args.model = smollm2_dir(args.model)

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    policy = HFPolicy.load(args.model)
    load_s = time.perf_counter() - t0
    n = policy.num_parameters
    flat = torch.zeros(n)
    pre = torch.randn(n)
    randn_s = timed(lambda: torch.randn(n, out=pre), args.reps)
    add_s = timed(lambda: flat.add_(pre, alpha=1e-3), args.reps)
    floor_s = randn_s + add_s
    copy_dst = {k: torch.empty_like(v) for k, v in policy.master.items()}
    copy_s = timed(lambda: [copy_dst[k].copy_(v) for k, v in policy.master.items()], args.reps)

    def draw_all():
        for name, t in policy.master.items():
            for _ in noise_chunks(1, name, t.numel()):
                pass

    noise_s = timed(draw_all, args.reps)
    # The generator alone against randn, same count, same buffer, interleaved.
    buf = torch.empty(16 * NOISE_BLOCK)
    gen_s = timed(lambda: draw(1, "w", 0, buf.numel(), out=buf), args.reps)
    randn16_s = timed(lambda: torch.randn(buf.numel(), out=buf), args.reps)
    es = ES(ESConfig(population_size=args.G, sigma=SigmaSchedule("constant", 1e-3, 1e-3, 1)))
    direction = es.ask(es.init())[0]
    perturb_s = timed(lambda: policy._write_perturbed(direction), args.reps)
    restore_s = timed(policy.restore, args.reps)
    update, _ = es.tell(es.init(), torch.arange(args.G, dtype=torch.float64).numpy())
    update_s = timed(lambda: policy.apply(update), 1)
    update_floor_s = args.G * randn_s + (args.G + 1) * add_s + copy_s

    rss_plain = peak_rss_child(args.model, "plain")
    rss_pert = peak_rss_child(args.model, "perturbed")
    serving_bytes = n * 4
    scratch_bytes = DEFAULT_CHUNK_BLOCKS * NOISE_BLOCK * 4
    report = {
        "model": args.model, "parameters": n, "torch_threads": torch.get_num_threads(),
        "load_s": round(load_s, 2),
        "randn_numbers_per_s": round(n / randn_s),
        "esopt_noise_numbers_per_s": round(n / noise_s),
        "generator_numbers_per_s": round(buf.numel() / gen_s),
        "randn_16M_numbers_per_s": round(buf.numel() / randn16_s),
        "generator_over_randn_throughput": round(randn16_s / gen_s, 2),
        "tp_rank_sliced_draw_peak_mb": round(peak_rss_child(args.model, "tp-sliced")),
        "tp_rank_whole_tensor_draw_peak_mb": round(peak_rss_child(args.model, "tp-whole")),
        "floor_randn_plus_add_s": round(floor_s, 3),
        "perturb_s": round(perturb_s, 3), "perturb_over_floor": round(perturb_s / floor_s, 2),
        "plain_copy_s": round(copy_s, 3),
        "restore_s": round(restore_s, 3), "restore_over_copy": round(restore_s / copy_s, 2),
        f"update_G{args.G}_s": round(update_s, 3),
        "update_over_floor": round(update_s / update_floor_s, 2),
        "peak_rss_plain_generate_mb": round(rss_plain),
        "peak_rss_perturbed_generate_mb": round(rss_pert),
        "peak_rss_ratio": round(rss_pert / rss_plain, 2),
        # With the master on the host, the accelerator holds the serving weights plus one
        # noise chunk (computed, not measured: no accelerator here).
        "accelerator_memory_ratio_master_on_host": round(
            (serving_bytes + scratch_bytes) / serving_bytes, 3),
    }
    for k, v in report.items():
        print(f"{k:45s} {v}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
