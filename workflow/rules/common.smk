import json
import os
import shlex

from esopt.pipeline.config import TINY_RANDOM, landscape_runs, trace2skill_json
from esopt.pipeline.spec import ASYNC_METHODS, ES_METHODS, RL_METHODS
from esopt.report.registry import (
    PARTS as REPORT_PARTS,
    ReportContext,
    evaluated_generations,
    first_page_inputs,
    report_outputs,
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
    return evaluated_generations(spec, METHODS_RUN)


# Figure 6: the reward landscape of one ES run per H*, around the base model (the paper's
# figure) or the run's final checkpoint (landscape.centre).
LANDSCAPES = {s.run_dir: section for s, section in landscape_runs(config)}
# The report's parts (esopt.report.registry): which runs each reads, the tables and
# figures it writes; report.smk has one rule per part.
REPORT = ReportContext.from_config(config, SPECS, AHD_RUNS)
REPORT_FACTS = json.dumps(REPORT.facts(), sort_keys=True)
REPORT_OUTPUTS = report_outputs(REPORT) + ["results/report.pdf"]


def report_part_output(part):
    """A part's files; each table's .md and figure's .pdf go into Snakemake's report with
    their caption and category."""
    out = []
    for a in part.artifacts:
        shown = a.report_file()
        out += [report(f, caption=f"../report/{a.caption_stem}.rst", category=a.category)
                if f == shown else f for f in a.files()]
    return out


def report_part_input(part):
    """What the part reads; an error naming the part when the config does not have it."""
    return lambda wildcards: part.input_files(REPORT)


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
    """The final checkpoint of the run (the one Table 6 measures; Figure 6's centre with
    landscape.centre final)."""
    spec = spec_of(wildcards)
    return checkpoint_dir(spec, spec.generations)


def final_checkpoint_input(wildcards):
    spec = spec_of(wildcards)
    return checkpoint_input(spec, spec.generations)


def landscape_options(wildcards):
    section = LANDSCAPES[spec_of(wildcards).run_dir]
    return (f"--grid {section.grid} --span {section.span} --tasks {section.tasks} "
            f"--centre {section.centre}")


def landscape_checkpoint(wildcards):
    """The landscape's centre: the base model or the run's final checkpoint."""
    spec = spec_of(wildcards)
    if LANDSCAPES[spec.run_dir].centre == "base":
        return spec.model
    return final_checkpoint(wildcards)


def landscape_input(wildcards):
    """What produces the centre checkpoint (an async or RL run writes all its own)."""
    spec = spec_of(wildcards)
    if LANDSCAPES[spec.run_dir].centre == "base":
        return spec.model
    return final_checkpoint_input(wildcards)


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


def trace2skill_settings(wildcards):
    """The experiment's Trace2Skill settings (JSON): a param of the distillation alone,
    never of a run's identity."""
    return trace2skill_json(config, wildcards.exp)


def skill_sources(wildcards):
    """Trace2Skill (base) plays its own rollouts in its iterations; ESOpt + Trace2Skill
    reads every direction of every generation of the ES run."""
    spec = spec_of(wildcards)
    if spec.method == "base":
        return []
    return [f"{spec.run_dir}/gen{g:03d}/directions.done.json" for g in range(spec.generations)]
