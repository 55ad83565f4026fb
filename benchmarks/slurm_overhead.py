"""Per-generation scheduling overhead of the SLURM fan-out on the local one-node cluster.

    bash scripts/slurm/start.sh && python benchmarks/slurm_overhead.py [--reps 3]

One generation (G=4 directions, 2 shards, smoke-scale tasks, the tiny random model) is
scored with `runtime.cluster: slurm` (one submitit job array: submit -> all results) and
with `runtime.cluster: local` (two local processes). Prints both wall times, their
difference (the scheduling overhead) and ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from bench_model import smollm2_dir

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--smollm2", help="SmolLM2 directory (default: bench_model.py finds it)")
    args = ap.parse_args()
    from esopt.models import make_tiny_model
    from esopt.pipeline.config import run_specs
    from esopt.pipeline.stages import evaluate_directions

    args.smollm2 = smollm2_dir(args.smollm2)
    work = Path(tempfile.mkdtemp(prefix="esopt-slurm-bench-"))
    tiny = make_tiny_model(work / "tiny", args.smollm2)
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["model"] = str(tiny)
    cfg["sudoku"]["horizons"] = [1]
    cfg["sudoku"]["es"].update(population_size=4, tasks_per_direction=2)
    spec = next(s for s in run_specs(cfg) if s.method == "esopt")
    walls: dict[str, list[float]] = {"slurm": [], "local": []}
    for rep in range(args.reps):
        for cluster in ("slurm", "local"):
            runtime = {"cluster": cluster, "workers": 2, "threads_per_worker": 1,
                       "timeout_min": 10, "slurm": {"partition": "debug", "cpus_per_task": 1,
                                                    "mem_gb": 2}}
            s = dataclasses.replace(spec, runtime=runtime)
            out = work / f"{cluster}{rep}" / "directions"
            t0 = time.perf_counter()
            evaluate_directions(s, 0, str(tiny), str(out), str(out) + ".done.json")
            walls[cluster].append(time.perf_counter() - t0)
    slurm_s, local_s = statistics.median(walls["slurm"]), statistics.median(walls["local"])
    report = {"generation_wall_s_slurm": round(slurm_s, 2),
              "generation_wall_s_local": round(local_s, 2),
              "scheduling_overhead_s": round(slurm_s - local_s, 2),
              "slurm_over_local": round(slurm_s / local_s, 2),
              "reps": args.reps, "all_slurm_s": [round(w, 2) for w in walls["slurm"]],
              "all_local_s": [round(w, 2) for w in walls["local"]]}
    for k, v in report.items():
        print(f"{k:28s} {v}")
    print(json.dumps(report))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
