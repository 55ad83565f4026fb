"""Wall time of a tiny ES run through the Snakemake DAG vs the same run in one process.

    python benchmarks/orchestration.py [--generations 2] [--G 4] [--tasks 4]

Both runs use SmolLM2-135M, Sudoku H*=1 (tiny-scale board), one worker of one thread
(so they compute the same numbers: the final checkpoint sha256 must match), and no
evaluation. Prints DAG wall / in-process wall (goal <= 1.25) and the share of the DAG's
job time spent importing and loading the model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from bench_model import smollm2_dir

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--generations", type=int, default=2)
    ap.add_argument("--G", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--model", help="model directory (default: found or fetched by bench_model.py)")
    args = ap.parse_args()
    args.model = str(Path(smollm2_dir(args.model)).resolve())

    wd = Path(tempfile.mkdtemp(prefix="esopt-orch-"))
    shutil.copy(REPO / "Snakefile", wd)
    for d in ("config", "workflow", "envs"):
        shutil.copytree(REPO / d, wd / d)
    (wd / "resources/models").mkdir(parents=True)
    (wd / "resources/models/smollm2-135m-instruct").symlink_to(args.model)
    # A typed YAML file: `--config key={...}` would pass nested values as strings.
    overrides = {
        "runtime": {"cluster": "local", "workers": 1, "threads_per_worker": 1,
                    "eval_threads": 1, "timeout_min": 60},
        "sudoku": {"horizons": [1], "methods": ["esopt"], "seeds": [0],
                   "es": {"population_size": args.G, "tasks_per_direction": args.tasks,
                          "generations": args.generations, "keep_every": args.generations}},
    }
    (wd / "bench.yaml").write_text(yaml.safe_dump(overrides))
    last = f"results/sudoku/h1/esopt/seed0/gen{args.generations:03d}/update.json"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = [str(Path(sys.executable).parent / "snakemake"), "--cores", "1", last,
           "--configfile", "bench.yaml"]
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=wd, env=env, check=True, capture_output=True)
    dag_s = time.perf_counter() - t0
    dag_sha = json.loads((wd / last).read_text())["sha256"]

    # Same run in one process, from the spec the DAG recorded.
    from esopt.pipeline.inprocess import train_in_process
    from esopt.pipeline.spec import RunSpec

    meta = pq.read_schema(wd / "results/sudoku/h1/esopt/seed0/gen000/rewards.parquet").metadata
    spec = RunSpec.from_json(meta[b"config"].decode())
    os.chdir(wd)
    t0 = time.perf_counter()
    manifest = train_in_process(spec, wd / "inprocess")
    inproc_s = time.perf_counter() - t0

    load_s = job_s = 0.0
    for g in range(args.generations):
        gen = wd / f"results/sudoku/h1/esopt/seed0/gen{g:03d}"
        rewards = pq.read_table(gen / "rewards.parquet").to_pydict()
        load_s += rewards["worker_load_s"][0]
        job_s += json.loads((gen / "directions.done.json").read_text())["wall_s"]
        record = json.loads((gen.parent / f"gen{g + 1:03d}" / "update.json").read_text())
        load_s += record["load_s"]
        job_s += record["update_wall_s"]
    report = {
        "generations": args.generations, "G": args.G, "tasks_per_direction": args.tasks,
        "dag_wall_s": round(dag_s, 1), "in_process_wall_s": round(inproc_s, 1),
        "dag_over_in_process": round(dag_s / inproc_s, 2),
        "model_load_s_in_dag_jobs": round(load_s, 1),
        "model_load_share_of_dag_wall": round(load_s / dag_s, 3),
        "stage_work_share_of_dag_wall": round(job_s / dag_s, 3),
        "same_final_sha256": dag_sha == manifest["sha256"],
    }
    for k, v in report.items():
        print(f"{k:35s} {v}")
    print(json.dumps(report))
    shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
