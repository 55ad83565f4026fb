"""A real Snakemake run of the web experiment on the smoke model: the sites started and
stopped by the jobs, every stage, Tables 4, 6, 12, Figure 10 and the report."""

import json

import psutil
import pyarrow.parquet as pq
import pytest

from tests.workflow.conftest import make_workdir, snakemake

pytestmark = pytest.mark.slow

WEB_SMOKE = """
experiments: [web]
web:
  env: web
  skills: true
  env_options: {split: train, viewport_lines: 10, max_chars: 600, max_new_tokens: 8}
  horizons: [2]
  methods: [base, esopt]
  seeds: [0]
  es: {population_size: 2, tasks_per_direction: 2, generations: 2, keep_every: 1}
  sigma: {esopt: {kind: constant, sigma_0: 1.0e-3}}
  train_decoder: {temperature: 1.0, max_new_tokens: 8}
  eval:
    tasks: 5
    repeats: 1
    decoder: {temperature: 1.0, max_new_tokens: 8}
    env_options: {split: test}
"""


def _site_servers() -> set[int]:
    return {p.pid for p in psutil.process_iter(["cmdline"])
            if "esopt.web.serve" in " ".join(p.info["cmdline"] or [])}


def test_web_experiment_runs_end_to_end(tmp_path, smollm2_dir):
    before = _site_servers()
    wd = make_workdir(tmp_path / "wf", smollm2_dir)
    (wd / "web_smoke.yaml").write_text(WEB_SMOKE)
    snakemake(wd, "all", "--config", "scale=smoke", "--configfile", "web_smoke.yaml")
    run = wd / "results/web/h2"
    table4 = (wd / "results/tables/table4.md").read_text()
    for header in ("Reddit", "GitLab", "CMS", "Map", "OSS", "Avg"):
        assert header in table4
    table12 = (wd / "results/tables/table12.md").read_text()
    for label in ("No Skill", "Agentic ESOpt + No Skill", "Trace2Skill",
                  "Agentic ESOpt + Trace2Skill"):
        assert f"| {label} |" in table12
    assert "| web | 2 | Agentic ESOpt | 0 | 2 |" in (wd / "results/tables/table6.md").read_text()
    # Held-out: the first 5 test tasks, one per site; every turn of the budget played.
    final = pq.read_table(run / "esopt/seed0/final/eval.parquet").to_pylist()
    sites = [json.loads(r["turns"][-1]["info"])["site"] for r in final]
    assert sorted(sites) == ["cms", "forum", "gitlab", "map", "shop"]
    record = json.loads((run / "esopt/seed0/skill/SKILL.json").read_text())
    assert record["episodes"] > 0  # the ES trajectories reached the distillation
    assert (wd / "results/figures/fig10.png").stat().st_size > 1000
    assert (wd / "results/report.pdf").read_bytes().startswith(b"%PDF")
    assert _site_servers() == before  # every job's site servers ended with it
