"""Which tiny-scale ES settings make SmolLM2-135M learn within the run command's budget?

    python benchmarks/tiny_sweep.py [--points a,b] [--generations 20] [--eval-tasks 128]
                                    [--model DIR] [--threads 2]

Each sweep point is config/config.yaml (the tiny scale) with a few keys overridden
(POINTS below). For a point, one ES run of `--generations` generations runs in this
process, all G directions of a generation scored in one population batch (the same
rewards as the DAG's workers), then the final weights and the base model play the same
`--eval-tasks` held-out puzzles with the evaluation decoder and the same sampling seeds.
Printed and appended to results/benchmarks/tiny_sweep.jsonl (a point already there is
not rerun): the training reward per generation (mean and std over directions), the
held-out success of base and final, and their paired difference with its 95% bootstrap
CI over tasks, and the wall time. `--table` renders the JSONL as the markdown table
committed beside this script (benchmarks/tiny_sweep.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from bench_model import smollm2_dir
from esopt.agent.evaluate import evaluate
from esopt.backends.hf import HFPolicy
from esopt.es.strategy import ES
from esopt.pipeline.config import merge_config, run_specs
from esopt.pipeline.objective import episodes_fitness, score_directions
from esopt.pipeline.stages import eval_tasks
from esopt.report.stats import mean_ci, paired_by_task

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results/benchmarks/tiny_sweep.jsonl"
BASE = ROOT / "results/benchmarks/tiny_sweep_base.jsonl"  # base model's held-out episodes

# name -> overrides of the sudoku experiment (merged over config/config.yaml). The
# search: the step (sigma, alpha), the fitness noise (tasks per direction vs directions,
# antithetic pairs) and the task's difficulty (H*, few-shot examples).
def _point(tasks: int, alpha: float, sigma_0: float, sigma_t: float, antithetic=False,
           population: int = 8) -> dict:
    """Every swept key explicit, so a point means the same whatever config.yaml says."""
    return {"es": {"population_size": population, "tasks_per_direction": tasks,
                   "alpha": alpha, "antithetic": antithetic},
            "sigma": {"esopt": {"kind": "cosine", "sigma_0": sigma_0, "sigma_T": sigma_t}}}


def _countdown(tasks: int, alpha: float, sigma_0: float, sigma_t: float, population: int = 16,
               count: int = 2) -> dict:
    """Countdown (Qiu et al.'s ES-at-scale task) with `count` numbers: single-turn episodes
    about 5x cheaper than a 4x4 Sudoku episode here, so more directions x tasks fit."""
    decoder = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "max_new_tokens": 24}
    return {**_point(tasks, alpha, sigma_0, sigma_t, population=population),
            "env": "countdown", "env_options": {"count": count, "max_number": 10, "few_shot": 3},
            "train_decoder": decoder, "eval": {"decoder": decoder},
            "landscape": {"enabled": False}}


POINTS = {
    # G=8 x 8 tasks: the tiny scale before issue 22 (1 generation = 64 episodes, ~2 min
    # on one core here, so 20 generations do not fit the run command's budget).
    "g8t8_s3e-3_a3e-3": _point(8, 3e-3, 3e-3, 1e-3),
    # G=8 x 4 tasks: half the episodes per generation; the update step alpha/sqrt(G) per
    # element is ~0.3 sigma (alpha 3e-3) or ~1 sigma (alpha 1e-2).
    "g8t4_s3e-3_a3e-3": _point(4, 3e-3, 3e-3, 1e-3),
    "g8t4_s3e-3_a1e-2": _point(4, 1e-2, 3e-3, 1e-3),
    "g8t4_s3e-3_a3e-3_anti": _point(4, 3e-3, 3e-3, 1e-3, antithetic=True),
    "g8t4_s3e-3_a1e-3": _point(4, 1e-3, 3e-3, 1e-3),
    "g8t4_s1e-2_a1e-2": _point(4, 1e-2, 1e-2, 3e-3),
    # The same step as g8t4_s3e-3_a3e-3 (z-scored weights: the step does not scale with
    # sigma) on a 3x wider smoothing of the landscape.
    "g8t4_s1e-2_a3e-3": _point(4, 3e-3, 1e-2, 3e-3),
    # Countdown with two numbers (base ~20-25% here): G=16 x 16 tasks per generation.
    "cd2_g16t16_s3e-3_a3e-3": _countdown(16, 3e-3, 3e-3, 1e-3),
    "cd2_g16t16_s1e-3_a1e-3": _countdown(16, 1e-3, 1e-3, 1e-3),
    "cd2_g16t16_s3e-3_a1e-3": _countdown(16, 1e-3, 3e-3, 1e-3),
    # Half the tasks per direction: half the cost of a generation.
    "cd2_g16t8_s3e-3_a3e-3": _countdown(8, 3e-3, 3e-3, 1e-3),
    # Constant sigma 3e-3: the cosine schedule's late sigmas (toward 1e-3) left 6 of 20
    # generations with all directions tied.
    "cd2_g16t16_s3e-3c_a3e-3": _countdown(16, 3e-3, 3e-3, 3e-3),
    # The tiny `all` point served in bf16 weights with float32 activations (1.4x faster
    # rollouts in benchmarks/es_generation.py): does ES still learn, and how much sooner?
    "cd2_g16t16_s3e-3_a3e-3_bf16w": {**_countdown(16, 3e-3, 3e-3, 1e-3),
                                     "serving_dtype": "bfloat16-weights"},
}
# Top-level config keys a point may set (the others are the experiment section's).
TOP_LEVEL = ("serving_dtype",)


def point_spec(name: str, model: str, horizon: int, method: str, generations: int):
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    point = {k: v for k, v in POINTS[name].items() if k not in TOP_LEVEL}
    top = {k: v for k, v in POINTS[name].items() if k in TOP_LEVEL}
    config = merge_config(config, {"model": model, "sudoku": point, **top})
    if "env_options" in POINTS[name]:  # another environment: its options replace Sudoku's
        config["sudoku"]["env_options"] = POINTS[name]["env_options"]
    config["sudoku"]["es"]["generations"] = generations  # the sigma schedule spans them
    config["sudoku"]["horizons"] = [horizon]
    config["sudoku"]["methods"] = [method]
    return run_specs(config)[0]


def held_out(policy, spec, tasks: int):
    seeds = eval_tasks(spec.env, spec.eval_env_kwargs, tasks)
    table, summary = evaluate(policy, spec.env, spec.eval_env_kwargs, seeds, 1,
                              spec.eval_decoder, seed=spec.seed)
    return table.column("task_seed").to_pylist(), [float(s) for s in
                                                   table.column("success").to_pylist()]


def base_held_out(policy, spec, tasks: int):
    """The base model's held-out episodes, played once per evaluation setting (the same
    for every point that shares it) and kept in BASE."""
    setting = [spec.env, spec.eval_env_kwargs, spec.eval_decoder.__dict__, spec.seed, tasks,
               spec.model]
    if spec.serving_dtype != "float32":  # float32 keys stay as they were
        setting.append(spec.serving_dtype)
    key = json.dumps(setting, sort_keys=True, default=str)
    if BASE.exists():
        for line in BASE.read_text().splitlines():
            row = json.loads(line)
            if row["key"] == key:
                return row["tasks"], row["success"]
    t0 = time.perf_counter()
    ids, success = held_out(policy, spec, tasks)
    print(f"  base: success {np.mean(success):.3f} on {tasks} tasks "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    BASE.parent.mkdir(parents=True, exist_ok=True)
    with BASE.open("a") as f:
        f.write(json.dumps({"key": key, "tasks": ids, "success": success}) + "\n")
    return ids, success


def run_point(name: str, args) -> dict:
    spec = point_spec(name, args.model, args.horizon, args.method, args.generations)
    policy = HFPolicy.load(spec.model, serving_dtype=spec.serving_dtype)
    # All G directions in one population batch where the policy allows it (float32), else
    # one direction at a time: the same rewards either way.
    per_batch = spec.es.population_size if policy.population_capable else 1
    base = base_held_out(policy, spec, args.eval_tasks)
    es = ES(spec.es)
    t0 = time.perf_counter()
    curve = []
    for t in range(args.generations):
        state = es.state_at(t)
        directions = es.ask(state)
        scored = [s for k in range(0, len(directions), per_batch)
                  for s in score_directions(policy, spec, t, list(directions[k:k + per_batch]))]
        rewards = [episodes_fitness(eps, spec.failed_episode_reward) for eps, _ in scored]
        update, _ = es.tell(state, rewards)
        policy.apply(update)
        curve.append((float(np.mean(rewards)), float(np.std(rewards))))
        print(f"  {name} gen {t:02d}: reward {curve[-1][0]:.3f} +- {curve[-1][1]:.3f} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    final = held_out(policy, spec, args.eval_tasks)
    eval_s = time.perf_counter() - t1
    diff = paired_by_task(final, base)
    row = {"point": name, "overrides": POINTS[name], "horizon": args.horizon,
           "serving_dtype": spec.serving_dtype,
           "method": args.method, "generations": args.generations,
           "G": spec.es.population_size, "tasks_per_direction": spec.tasks_per_direction,
           "curve": curve, "eval_tasks": args.eval_tasks,
           "base": mean_ci(base[1]).__dict__, "final": mean_ci(final[1]).__dict__,
           "diff": diff.__dict__, "train_s": train_s, "eval_s": eval_s, "threads": args.threads}
    return row


def table(rows: list[dict]) -> str:
    lines = ["| point | env, H* | G x tasks | gens | train reward first 5 -> last 5 | base | final "
             "| final - base [95% CI] | train min |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = [m for m, _ in r["curve"]]
        k = min(5, len(c))
        lines.append(
            f"| {r['point']} | {r['overrides'].get('env', 'sudoku')} {r['horizon']} | "
            f"{r['G']} x {r['tasks_per_direction']} | "
            f"{r['generations']} | {np.mean(c[:k]):.3f} -> {np.mean(c[-k:]):.3f} | "
            f"{r['base']['mean']:.3f} | {r['final']['mean']:.3f} | "
            f"{r['diff']['mean']:+.3f} [{r['diff']['lo']:+.3f}, {r['diff']['hi']:+.3f}] | "
            f"{r['train_s'] / 60:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", default=",".join(POINTS))
    ap.add_argument("--generations", type=int, default=20)
    ap.add_argument("--eval-tasks", type=int, default=128)
    ap.add_argument("--horizon", type=int, default=1)
    ap.add_argument("--method", default="esopt")
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--table", action="store_true", help="print the markdown table and exit")
    args = ap.parse_args()
    done = [json.loads(x) for x in OUT.read_text().splitlines()] if OUT.exists() else []
    if args.table:
        print(table(done))
        return
    args.model = args.model or str(smollm2_dir())
    torch.set_num_threads(args.threads)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    keys = {(r["point"], r["horizon"], r["method"], r["generations"], r["eval_tasks"])
            for r in done}
    for name in args.points.split(","):
        if name not in POINTS:
            raise SystemExit(f"unknown point {name!r}; choose from {list(POINTS)}")
        if (name, args.horizon, args.method, args.generations, args.eval_tasks) in keys:
            continue
        row = run_point(name, args)
        with OUT.open("a") as f:
            f.write(json.dumps(row) + "\n")
        done.append(row)
        print(table(done[-1:]), flush=True)


if __name__ == "__main__":
    main()
