from snakemake.utils import min_version, validate

from esopt.pipeline.config import ahd_run_list, parse_config, run_specs, scale_file

min_version("8.0")


configfile: "config/config.yaml"


configfile: str(scale_file(workflow.basedir, config.get("scale", "tiny")))


# Unknown keys (with the closest valid one), types and values, naming the key; then the
# schema generated from the same dataclasses, which also fills in the defaults.
parse_config(config)


validate(config, "workflow/schemas/config.schema.yaml")

SPECS = run_specs(config)
AHD_RUNS = ahd_run_list(config)


include: "workflow/rules/common.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/es.smk"
include: "workflow/rules/rl.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/landscape.smk"
include: "workflow/rules/ahd.smk"
include: "workflow/rules/skills.smk"
include: "workflow/rules/report.smk"


# Light rules run where Snakemake runs, also under `--profile slurm`: the submitit
# coordinator of a generation's directions (its array tasks are the SLURM jobs), reduce,
# update, ledgers, model download/conversion (the network is on the submitting node),
# tables, figures, report. Every other rule (held-out evaluation, RL training, AHD search
# and references, skill rollouts and distillation, landscape, async ES) is a SLURM job
# with the resources of the profile.
localrules:
    all,
    evaluate_directions,
    reduce_rewards,
    update_kept,
    update_temp,
    es_ledger,
    final_eval,
    fetch_model,
    tiny_random_model,
    fetch_hub_model,
    run_index,
    report_pdf,
    ahd_run_index,


rule all:
    input:
        get_final_output(),
