import json
import os
import shlex

from esopt.pipeline.config import TINY_RANDOM, landscape_runs
from esopt.pipeline.spec import (
    ASYNC_METHODS,
    COMPANION_METHODS,
    ES_METHODS,
    RL_METHODS,
    TRAINING_REWARD_ENVS,
)

RUN = "results/{exp}/h{h}/{method}/seed{seed}"
# Timing files go under results/benchmarks/ (ignored), never into the source tree.
RUN_REL = RUN.removeprefix("results/")
SPEC_BY_RUN = {(s.experiment, str(s.horizon), s.run_method, str(s.seed)): s for s in SPECS}
METHODS_RUN = {s.method for s in SPECS}
# Checkpoints kept (not temp): every k-th and the last, over all runs.
KEPT = sorted({g for s in SPECS for g in s.kept_generations() if g > 0}) or [1]
# Cores a job occupies, so that Snakemake does not oversubscribe the machine: the local
# fan-out runs `workers` processes of `threads_per_worker` threads each.
RUNTIME = config.get("runtime", {})
FANOUT_THREADS = (
    RUNTIME.get("workers", 1) * RUNTIME.get("threads_per_worker", 1)
    if RUNTIME.get("cluster", "local") in ("local", "inline", "debug")
    else 1
)
EVAL_THREADS = RUNTIME.get("eval_threads", 2)
# Runtime settings reach `esopt stage` through the environment (ESOPT_RUNTIME, inherited
# by every job's shell, here and in SLURM jobs, which parse this file again), never as
# params or in the command: Snakemake reruns a job when either changes, and a new
# partition or worker count must rerun nothing.
os.environ.update(ESOPT_RUNTIME=json.dumps(RUNTIME, sort_keys=True))
KEPT_GEN = "|".join(f"{g:03d}" for g in KEPT)
UPDATE_SHELL = (
    "esopt stage update --spec {params.spec:q} "
    "--generation {params.parent} "
    "--checkpoint {input.checkpoint} --rewards {input.rewards} "
    "--out {output.checkpoint} --record {output.record} > {log} 2>&1"
)


ES_METHOD = "|".join(ES_METHODS)
RL_METHOD = "|".join(RL_METHODS)
ASYNC_METHOD = "|".join(ASYNC_METHODS)


wildcard_constraints:
    exp="[a-z_]+",
    problem="[a-z_]+",
    h="[0-9]+",
    method="[a-z0-9_]+",
    seed="[0-9]+",
    gen="[0-9]{3}",


def spec_of(wildcards):
    return SPEC_BY_RUN[(wildcards.exp, wildcards.h, wildcards.method, wildcards.seed)]


def spec_json(wildcards):
    """The run's identity (no runtime settings): a params value, so it decides reruns."""
    return spec_of(wildcards).identity_json()


def checkpoint_dir(spec, generation):
    """Checkpoint directory of `generation` of a run (0 = the base model; RL runs: step)."""
    if generation == 0:
        return spec.model
    if spec.method in RL_METHODS:
        return f"{spec.run_dir}/rl/gen{generation:03d}"
    if spec.method in ASYNC_METHODS:
        return f"{spec.run_dir}/async/gen{generation:03d}"
    return f"{spec.run_dir}/gen{generation:03d}/checkpoint"


def checkpoint_input(spec, generation):
    """What produces that checkpoint: an RL run writes all its kept ones in one job."""
    if generation > 0 and spec.method in RL_METHODS:
        return f"{spec.run_dir}/rl"
    if generation > 0 and spec.method in ASYNC_METHODS:
        return f"{spec.run_dir}/async"
    return checkpoint_dir(spec, generation)


def eval_generations(spec):
    """Generations evaluated for a run; generation 0 of trained runs comes from `base`."""
    gens = spec.kept_generations()
    if spec.method != "base" and "base" in METHODS_RUN:
        gens = [g for g in gens if g > 0]
    return gens


# Table 1, Table 7 and Figure 3 are the Sudoku experiment's; the training-reward figure
# and the report's first page also cover Countdown (math's runs feed Table 3).
SUDOKU_SPECS = [s for s in SPECS if s.env == "sudoku"]
FIGURE_SPECS = [s for s in SPECS if s.env in TRAINING_REWARD_ENVS]
TABLES = [
    f"results/tables/{t}.{ext}"
    for t in ("table1", "table2", "table7")
    for ext in ("csv", "md", "tex")
    if SUDOKU_SPECS
]
FIGURES = [
    f"results/figures/{f}.{ext}"
    for f in ("fig3", "fig7", "train_reward")
    for ext in ("pdf", "png")
    if SUDOKU_SPECS
]
# Figure 6: the reward landscape around the final checkpoint of one ES run per H*.
LANDSCAPES = {s.run_dir: section for s, section in landscape_runs(config)}
LANDSCAPE_FILES = [f"{run}/landscape.parquet" for run in LANDSCAPES]
LANDSCAPE_OUTPUTS = [f"results/figures/fig6.{ext}" for ext in ("pdf", "png") if LANDSCAPES]
AHD_TABLES = [
    f"results/tables/{t}.{ext}"
    for t in ("table5", "table13", "table14", "table17", "table18")
    for ext in ("csv", "md", "tex")
    if AHD_RUNS
]
# Experiments with `skills: true` add the Trace2Skill conditions: Table 3 and Figure 8 for
# math, Table 12 for web.
SKILL_EXPERIMENTS = [
    e for e in config.get("experiments", []) if e != "ahd" and config.get(e, {}).get("skills")
]
# The web experiment's runs: Table 4 (per site), Table 12 and Figure 10.
WEB_EXPERIMENTS = [e for e in config.get("experiments", []) if e == "web"]
WEB_SPECS = [s for s in SPECS if s.experiment in WEB_EXPERIMENTS and not s.eval_model]
WEB_OUTPUTS = (
    [f"results/tables/{t}.{ext}" for t in ("table4", "table12") for ext in ("csv", "md", "tex")]
    + [f"results/figures/fig10.{ext}" for ext in ("pdf", "png")]
    if WEB_SPECS
    else []
)
SKILL_SPECS = [
    s
    for s in SPECS
    if s.experiment in SKILL_EXPERIMENTS
    and s.method in ("base", "esopt")
    and not s.eval_model
]
MATH_SKILL_SPECS = [s for s in SKILL_SPECS if s.experiment not in WEB_EXPERIMENTS]
WEB_SKILL_SPECS = [s for s in SKILL_SPECS if s.experiment in WEB_EXPERIMENTS]
# Table 3's experiments: math with Trace2Skill, and DocVQA (no skills; base, GRPO, ESOpt).
DOCVQA_EXPERIMENTS = list(dict.fromkeys(s.experiment for s in SPECS if s.env == "docvqa"))
TABLE3_EXPERIMENTS = [
    e for e in SKILL_EXPERIMENTS if e not in WEB_EXPERIMENTS
] + DOCVQA_EXPERIMENTS
TABLE3_SPECS = [
    s
    for s in SPECS
    if s.experiment in TABLE3_EXPERIMENTS
    and s.method in ("base", "esopt", "grpo")
    and not s.eval_model
]
# Evaluation-only models' final evaluations: rows of Table 3 (No Skill), no skill of their own.
SKILL_EVAL_MODEL_SPECS = [
    s for s in SPECS if s.experiment in TABLE3_EXPERIMENTS and s.eval_model
]
# Figure 9: the realized trajectory length of DocVQA's trained runs, from their ledgers.
DOCVQA_TRAINED_SPECS = [
    s for s in TABLE3_SPECS if s.env == "docvqa" and s.method in ("esopt", "grpo")
]
MATH_OUTPUTS = (
    [f"results/tables/table3.{ext}" for ext in ("csv", "md", "tex")]
    + [f"results/figures/fig8.{ext}" for ext in ("pdf", "png")]
    + [f"results/figures/fig9.{ext}" for ext in ("pdf", "png") if DOCVQA_TRAINED_SPECS]
    if TABLE3_SPECS
    else []
)
# The companion-methods comparison when any of copes, async_es, lowrank_es ran on Sudoku.
COMPANION_OUTPUTS = (
    [f"results/tables/companions.{ext}" for ext in ("csv", "md", "tex")]
    + [f"results/figures/companions.{ext}" for ext in ("pdf", "png")]
    if any(s.method in COMPANION_METHODS for s in SUDOKU_SPECS)
    else []
)
# Table 6: the update magnitudes |final - base| of every trained ES run.
MAGNITUDE_FILES = [
    f"{s.run_dir}/final/update_magnitudes.json"
    for s in SPECS
    if s.method in ES_METHODS + ASYNC_METHODS and s.generations
]
TABLE6 = [f"results/tables/table6.{ext}" for ext in ("csv", "md", "tex") if MAGNITUDE_FILES]
REPORT_OUTPUTS = (
    TABLES
    + TABLE6
    + FIGURES
    + LANDSCAPE_OUTPUTS
    + AHD_TABLES
    + MATH_OUTPUTS
    + WEB_OUTPUTS
    + COMPANION_OUTPUTS
    + ["results/report.pdf"]
)


def run_results(specs):
    """What the report reads of `specs`: final and kept evaluations, ledgers."""
    inputs = [f"{s.run_dir}/final/eval.parquet" for s in specs]
    inputs += [f"{s.run_dir}/eval/gen{g:03d}.parquet" for s in specs for g in eval_generations(s)]
    inputs += [f"{s.run_dir}/ledger.parquet" for s in specs if s.generations]
    return inputs


def web_results(wildcards):
    """What Table 4, Table 12 and Figure 10 read: evaluations, skill evaluations."""
    return run_results(WEB_SPECS) + [f"{s.run_dir}/skill/eval.parquet" for s in WEB_SKILL_SPECS]


def sudoku_results(wildcards):
    return run_results(SUDOKU_SPECS)


def figure_results(wildcards):
    return run_results(FIGURE_SPECS)


def directions_input(wildcards):
    return checkpoint_dir(spec_of(wildcards), int(wildcards.gen))


def update_input(wildcards):
    spec, gen = spec_of(wildcards), int(wildcards.gen)
    return {
        "checkpoint": checkpoint_dir(spec, gen - 1),
        "rewards": f"{spec.run_dir}/gen{gen - 1:03d}/rewards.parquet",
    }


def eval_input(wildcards):
    return checkpoint_input(spec_of(wildcards), int(wildcards.gen))


def eval_checkpoint(wildcards):
    return checkpoint_dir(spec_of(wildcards), int(wildcards.gen))


def es_ledger_input(wildcards):
    spec = spec_of(wildcards)
    return [f"{spec.run_dir}/gen{g:03d}/rewards.parquet" for g in range(spec.generations)] + [
        f"{spec.run_dir}/gen{g:03d}/update.json" for g in range(1, spec.generations + 1)
    ]


def final_checkpoint(wildcards):
    """The final checkpoint of the run (the one Figure 6 probes and Table 6 measures)."""
    spec = spec_of(wildcards)
    return checkpoint_dir(spec, spec.generations)


def final_checkpoint_input(wildcards):
    spec = spec_of(wildcards)
    return checkpoint_input(spec, spec.generations)


def landscape_options(wildcards):
    section = LANDSCAPES[spec_of(wildcards).run_dir]
    return f"--grid {section.grid} --span {section.span} --tasks {section.tasks}"


def final_eval_input(wildcards):
    spec = spec_of(wildcards)
    return f"{spec.run_dir}/eval/gen{spec.generations:03d}.parquet"


def get_final_output():
    outputs = [f"{s.run_dir}/final/eval.parquet" for s in SPECS]
    outputs += [f"{s.run_dir}/eval/gen{g:03d}.parquet" for s in SPECS for g in eval_generations(s)]
    outputs += REPORT_OUTPUTS
    return outputs


AHD_BY_KEY = {(r.problem, r.method, str(r.seed)): r for r in AHD_RUNS}
AHD_DIR = "results/ahd/{problem}/{method}/seed{seed}"
AHD_REL = AHD_DIR.removeprefix("results/")


def ahd_run_of(wildcards):
    return AHD_BY_KEY[(wildcards.problem, wildcards.method, wildcards.seed)]


def ahd_instances_flag(wildcards):
    """`--instances DIR` when the config names the benchmark files (else the generators)."""
    root = config.get("ahd", {}).get("instances")
    return f"--instances {shlex.quote(str(root))}" if root else ""


def ahd_summaries(wildcards):
    return [f"{r.run_dir}/summary.json" for r in AHD_RUNS]


def table3_report_output(path):
    """Table 3's Markdown and the figures' PDFs go into Snakemake's report with captions."""
    name, ext = os.path.basename(path).split(".")
    if ext in ("md", "pdf"):
        return report(path, caption=f"../report/{name}.rst", category="Math and DocVQA")
    return path


def skill_sources(wildcards):
    """Trace2Skill reads the base model's training rollouts; ESOpt + Trace2Skill reads every
    direction of every generation of the ES run."""
    spec = spec_of(wildcards)
    if spec.method == "base":
        return [f"{spec.run_dir}/skill/rollouts.parquet"]
    return [f"{spec.run_dir}/gen{g:03d}/directions.done.json" for g in range(spec.generations)]
