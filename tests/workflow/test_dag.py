"""Dry runs, lint and config validation: fast, no job runs."""

import re

import pytest

from tests.workflow.conftest import REPO, snakemake


def test_dry_run_of_all_at_the_default_scale(workdir):
    out = snakemake(workdir, "-n", "all").stdout
    # ESOpt at H*=1 on Sudoku and on Countdown: 20 generations each, checkpoints 10 and
    # 20 and the base model evaluated per experiment; GRPO on Countdown at matched FLOPs:
    # one training job, its steps 32 and 64 evaluated; Figure 6 is Sudoku's only
    assert re.search(r"evaluate_directions\s+40\n", out) and "report_pdf" in out
    assert re.search(r"evaluate_checkpoint\s+8\n", out) and re.search(r"rl_train\s+1\n", out)
    assert "results/countdown/h1/grpo/seed0/eval/gen064.parquet" in out
    assert re.search(r"report_countdown_compare\s+1\n", out)
    assert re.search(r"landscape\s+1\n", out) and re.search(r"report_figure6\s+1\n", out)


def test_dry_run_of_every_table1_row_at_the_tiny_scale(workdir):
    out = snakemake(workdir, "-n", "all", "--config", "scale=tiny-table1").stdout
    assert "evaluate_directions" in out and "report_pdf" in out
    # 2 H* x 3 RL baselines, each one training job and one evaluation of its last step
    assert re.search(r"rl_train\s+6\n", out)
    assert re.search(r"es_ledger\s+4\n", out)
    # Figure 6: one landscape per H* (esopt, seed 0), one figure job
    assert re.search(r"landscape\s+2\n", out) and re.search(r"report_figure6\s+1\n", out)


def test_dry_run_of_the_smoke_and_paper_scales(workdir):
    snakemake(workdir, "-n", "all", "--config", "scale=smoke")
    # As a user runs it on a cluster: the `slurm` profile found from the repository root.
    out = snakemake(workdir, "--profile", "slurm", "-n", "all", "--config", "scale=paper").stdout
    assert "slurm_partition=gpu" in out and "gpu=1" in out  # the profile's resources
    # paper: 3 H* x 2 ES methods x 3 seeds x 100 generations of directions
    assert re.search(r"evaluate_directions\s+1800\n", out)
    assert re.search(r"rl_train\s+27\n", out)  # 3 H* x 3 RL methods x 3 seeds
    assert "ahd_search" not in out  # AHD runs on its own backbone: scale=ahd-paper*
    assert re.search(r"fetch_hub_model\s+1\n", out)


def test_dry_run_with_an_evaluation_only_model(workdir):
    """eval_models: the model is fetched and evaluated as base (one final evaluation per
    H* x seed, no training), and the tables wait for it."""
    out = snakemake(workdir, "-n", "all", "--config", "eval_models=[Qwen/Qwen3.5-27B]").stdout
    assert re.search(r"fetch_hub_model\s+1\n", out)
    # the default tiny run, per experiment (Sudoku, Countdown): base (generation 0) and
    # ESOpt's 10 and 20, plus the new model's; GRPO's two on Countdown
    assert re.search(r"evaluate_checkpoint\s+10\n", out) and re.search(r"rl_train\s+1\n", out)
    for exp in ("sudoku", "countdown"):
        assert f"results/{exp}/h1/base_qwen_qwen3_5_27b/seed0/eval/gen000.parquet" in out
    assert "results/tables/table1.csv" in out


def test_dry_run_of_the_docvqa_scale(workdir):
    out = snakemake(workdir, "-n", "all", "--config", "scale=docvqa").stdout
    # ESOpt: 2 generations of directions, reduce, update; GRPO: one training job; base,
    # ESOpt and GRPO each evaluated once (base at generation 0, the others at their last);
    # Table 3 and Figure 8 in one report job, Figure 9 (the trained runs' ledgers) in
    # another, then the PDF.
    assert re.search(r"evaluate_directions\s+2\n", out)
    assert re.search(r"reduce_rewards\s+2\n", out) and re.search(r"es_ledger\s+1\n", out)
    assert re.search(r"rl_train\s+1\n", out) and re.search(r"evaluate_checkpoint\s+3\n", out)
    assert re.search(r"report_math\s+1\n", out) and re.search(r"report_figure9\s+1\n", out)
    assert re.search(r"report_pdf\s+1\n", out)
    assert "skill_rollouts" not in out and "distill_skill" not in out  # no Trace2Skill
    for method, gen in (("base", 0), ("esopt", 2), ("grpo", 2)):
        assert f"results/docvqa/h2/{method}/seed0/eval/gen{gen:03d}.parquet" in out
    for path in ("results/tables/table3.md", "results/figures/fig8.png",
                 "results/figures/fig9.png", "results/docvqa/h2/grpo/seed0/ledger.parquet"):
        assert path in out
    assert "results/figures/fig3" not in out  # Sudoku's figures: not this scale's


def test_dry_run_of_docvqa_with_trace2skill(workdir):
    """DocVQA has Trace2Skill prompts of its own: with skills, its two skill conditions
    (the baseline iterating in its distillation job, ESOpt + Trace2Skill post hoc) join
    Table 3 once; no rollouts job (the baseline plays its own)."""
    (workdir / "skills.yaml").write_text("docvqa: {skills: true, trace2skill: {iterations: 3}}\n")
    out = snakemake(workdir, "-n", "all", "--config", "scale=docvqa",
                    "--configfile", "skills.yaml").stdout
    assert re.search(r"distill_skill\s+2\n", out) and re.search(r"skill_eval\s+2\n", out)
    assert "skill_rollouts" not in out and "results/tables/table3.md" in out
    for method in ("base", "esopt"):
        assert f"results/docvqa/h2/{method}/seed0/skill/eval.parquet" in out


def test_dry_run_of_the_math_scale_has_the_grpo_row(workdir):
    # The scale evaluates on ../shared/data/math/dapo_test.jsonl (beside the checkout).
    shared = REPO.parent / "shared"
    if not (shared / "data" / "math").is_dir():
        pytest.skip(f"needs {shared / 'data' / 'math'}")
    (workdir.parent / "shared").symlink_to(shared)
    out = snakemake(workdir, "-n", "all", "--config", "scale=math").stdout
    assert re.search(r"rl_train\s+1\n", out)
    assert "results/math/h2/grpo/seed0/final/eval.parquet" in out
    assert re.search(r"report_math\s+1\n", out) and "results/figures/fig9" not in out
    assert "report_figure9" not in out
def test_dry_run_of_the_web_scales(workdir):
    out = snakemake(workdir, "-n", "all", "--config", "scale=web").stdout
    # 3 generations, evaluated after each update and at the base; Trace2Skill's rollouts,
    # two distillations and two skill evaluations; Tables 4, 12, Figure 10 in one job.
    assert re.search(r"evaluate_directions\s+3\n", out)
    assert re.search(r"evaluate_checkpoint\s+4\n", out)
    assert re.search(r"distill_skill\s+2\n", out) and re.search(r"skill_eval\s+2\n", out)
    assert re.search(r"report_web\s+1\n", out) and "results/figures/fig10.png" in out
    assert "report_math" not in out and "results/tables/table3.csv" not in out
    out = snakemake(workdir, "--profile", "slurm", "-n", "all", "--config",
                    "scale=web-paper").stdout
    # Table 19: 3 seeds x 70 generations; evaluations every 10 updates and the base
    assert re.search(r"evaluate_directions\s+210\n", out)
    assert re.search(r"evaluate_checkpoint\s+24\n", out)
    assert re.search(r"report_table6\s+1\n", out) and re.search(r"report_web\s+1\n", out)


def test_dry_run_of_the_companions_scale(workdir):
    out = snakemake(workdir, "-n", "all", "--config", "scale=companions").stdout
    # vanilla_es, copes, lowrank_es: the per-generation DAG, 2 generations each; async_es:
    # one coordinator job; the comparison table and figure in one report job.
    assert re.search(r"evaluate_directions\s+6\n", out)
    assert re.search(r"async_train\s+1\n", out)
    assert re.search(r"report_companions\s+1\n", out)
    assert "rl_train" not in out


def test_dry_run_of_the_tiny_compare_scale(workdir):
    """Issue 37: every method on Countdown through the DAG, RL at ESOpt's FLOPs."""
    out = snakemake(workdir, "-n", "all", "--config", "scale=tiny-compare").stdout
    # ES: ESOpt x 2 seeds, vanilla ES, CoPES, low-rank ES x 10 generations; async one job.
    assert re.search(r"evaluate_directions\s+50\n", out)
    assert re.search(r"async_train\s+1\n", out)
    # GRPO and GRPO-B x 2 seeds, PPO: one job each, kept steps at ESOpt's kept FLOPs.
    assert re.search(r"rl_train\s+5\n", out)
    assert "results/countdown/h1/grpo/seed1/eval/gen032.parquet" in out
    assert "results/countdown/h1/ppo/seed0/eval/gen018.parquet" in out
    assert "results/countdown/h1/base/seed1/eval/gen000.parquet" in out
    # base x 2 + 11 trained runs x 2 kept checkpoints.
    assert re.search(r"evaluate_checkpoint\s+24\n", out)
    assert re.search(r"report_countdown_compare\s+1\n", out)
    assert "results/figures/countdown_flops.pdf" in out
    assert "sudoku" not in out


def test_dry_run_of_the_ahd_paper_scale_on_the_benchmark_files(workdir):
    # The scale names the benchmark files at ../shared/data/ahd (beside the checkout).
    shared = REPO.parent / "shared"
    if not (shared / "data" / "ahd").is_dir():
        pytest.skip(f"needs {shared / 'data' / 'ahd'}")
    (workdir.parent / "shared").symlink_to(shared)
    out = snakemake(workdir, "-n", "all", "--config", "scale=ahd-paper-t2000").stdout
    # 6 problems (3 constructive, 3 ACO) x 4 methods x 3 seeds, on LLaMA-3.1-8B-Instruct
    assert re.search(r"ahd_search\s+72\n", out)
    assert re.search(r"fetch_hub_model\s+1\n", out) and "evaluate_directions" not in out


# The project is pip only (README, Running on SLURM): every rule runs in the environment
# of scripts/install.sh, so no rule names a conda env or container. That is the one lint
# accepted; any other fails the test.
PIP_ONLY_LINT = "Specify a conda environment or container for each rule."


def test_lint_is_clean_but_for_pip_only(workdir):
    proc = snakemake(workdir, "--lint", check=False)
    out = proc.stdout + proc.stderr
    titles = set(re.findall(r"^    \* (.+?):?$", out, re.M))
    assert titles <= {PIP_ONLY_LINT}, out[-3000:]
    assert "Lints for rule" in out or "Congratulations" in out, out[-3000:]  # lint ran


# The Snakefile's wiring of the strict config, one case per kind of error (a bound, an
# unknown key, a YAML type, a scale, the AHD section); every case, in process, in
# tests/pipeline/test_config.py::test_bad_config_files_name_the_key (a dry run costs ~10 s).
@pytest.mark.parametrize("override, key", [
    ("sudoku: {sigma: {esopt: {kind: cosine, sigma_0: -1.0e-3, sigma_T: 1.0e-4}}}",
     "sudoku.sigma.esopt.sigma_0: must be > 0"),
    ("scale: huge", "scale: no scale 'huge'"),
    ("sudoku: {es: {populaton_size: 32}}",
     "sudoku.es.populaton_size: unknown key; did you mean 'population_size'?"),
    ("sudoku: {es: {alpha: 1e-3}}", "sudoku.es.alpha: expected a number, got the string '1e-3'"),
    ("ahd: {es: {sigma_0: 0.0}}", "ahd.es.sigma_0: must be > 0"),
])
def test_bad_config_fails_before_any_job_naming_the_key(workdir, override, key):
    (workdir / "bad.yaml").write_text(override + "\n")
    proc = snakemake(workdir, "-n", "all", "--configfile", "bad.yaml", check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert key in text, text[-2000:]
    assert not (workdir / "results").exists()


@pytest.mark.parametrize("centre", ["base", "final"])
def test_figure6_is_drawn_around_the_configured_centre(workdir, centre):
    """Issue 36: the landscape was always centred on the final ESOpt checkpoint; the
    paper's Figure 6 is centred on the base model, now the default."""
    target = "results/sudoku/h1/esopt/seed0/landscape.parquet"
    extra = [] if centre == "base" else ["--config", "sudoku={landscape: {centre: final}}"]
    out = snakemake(workdir, "-n", "-p", target, *extra).stdout
    command = next(line for line in out.splitlines() if "esopt stage landscape" in line)
    checkpoint = command.split("--checkpoint ")[1].split()[0]
    assert f"--centre {centre}" in command
    if centre == "base":
        assert checkpoint == "resources/models/smollm2-135m-instruct"
        assert "evaluate_directions" not in out  # no training needed
    else:
        assert checkpoint == "results/sudoku/h1/esopt/seed0/gen020/checkpoint"
        assert re.search(r"evaluate_directions\s+20\n", out)


def test_table6_measures_every_trained_es_run_async_included(workdir):
    """Table 6's |final - base| fractions come from every ES method's runs: the companions
    scale trains vanilla ES, CoPES, async ES and low-rank ES, each measured once."""
    out = snakemake(workdir, "-n", "results/tables/table6.csv", "--config",
                    "scale=companions").stdout
    assert re.search(r"update_magnitudes\s+4\n", out)
    for method in ("vanilla_es", "copes", "async_es", "lowrank_es"):
        assert f"results/sudoku/h1/{method}/seed0/final/update_magnitudes.json" in out
