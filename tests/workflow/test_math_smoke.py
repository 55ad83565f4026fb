"""A real Snakemake run of the math experiment on the smoke model: every stage, Table 3."""

import json

import pyarrow.parquet as pq
import pytest

from tests.workflow.conftest import make_workdir, snakemake

pytestmark = pytest.mark.slow

MATH_SMOKE = """
experiments: [math]
math:
  env: math_tool
  skills: true
  env_options: {data: "generated:20:0", max_new_tokens: 8, require_tool: true}
  horizons: [2]
  methods: [base, esopt]
  seeds: [0]
  es: {population_size: 2, tasks_per_direction: 2, generations: 1, keep_every: 1}
  sigma: {esopt: {kind: cosine, sigma_0: 1.0e-3, sigma_T: 5.0e-4}}
  train_decoder: {temperature: 1.0, max_new_tokens: 8}
  eval:
    tasks: 3
    repeats: 2
    decoder: {temperature: 1.0, max_new_tokens: 8}
    env_options: {data: "generated:10:7"}
"""


def test_math_experiment_runs_end_to_end(tmp_path, smollm2_dir):
    wd = make_workdir(tmp_path / "wf", smollm2_dir)
    (wd / "math_smoke.yaml").write_text(MATH_SMOKE)
    snakemake(wd, "all", "--config", "scale=smoke", "--configfile", "math_smoke.yaml")
    run = wd / "results/math/h2"
    table3 = (wd / "results/tables/table3.md").read_text()
    for label in ("No Skill", "Agentic ESOpt + No Skill", "Trace2Skill",
                  "Agentic ESOpt + Trace2Skill"):
        assert f"| {label} |" in table3
    assert "Mean@2" in table3 and "Pass@2" in table3
    for method in ("base", "esopt"):
        skill = (run / method / "seed0/skill/SKILL.md").read_text()
        assert skill.startswith("# Skills")
        record = json.loads((run / method / "seed0/skill/SKILL.json").read_text())
        assert record["episodes"] > 0
        meta = pq.read_schema(run / method / "seed0/skill/eval.parquet").metadata
        assert json.loads(meta[b"config"])["eval_env_options"] == {"data": "generated:10:7"}
    # The skill evaluation saw the skill in its system prompt.
    first = pq.read_table(run / "base/seed0/skill/eval.parquet").column("first_prompt")[0]
    assert "# Skills" in json.loads(first.as_py())[0]["content"]
    assert (wd / "results/figures/fig8.png").stat().st_size > 1000
    assert (wd / "results/report.pdf").read_bytes().startswith(b"%PDF")
