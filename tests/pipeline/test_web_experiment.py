"""The web experiment in the pipeline: the scale files, horizon = turn budget, train and
test splits, and Table 4, Table 12 and Figure 10 from evaluation files."""

import os
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from esopt.envs import make_env
from esopt.pipeline.config import merge_config, run_specs
from esopt.pipeline.stages import eval_tasks
from esopt.report.web_report import figure10, site_successes, table4, table12

REPO = Path(__file__).resolve().parents[2]


def scale(name):
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    return merge_config(base, yaml.safe_load((REPO / f"config/scales/{name}.yaml").read_text()))


def test_paper_scale_has_table19s_settings():
    specs = run_specs(scale("web-paper"))
    esopt = [s for s in specs if s.method == "esopt"]
    assert [s.seed for s in esopt] == [0, 1, 2] and {s.model for s in esopt} == {
        "resources/models/hub/Qwen--Qwen3.5-27B"}
    es = esopt[0].es
    assert (es.population_size, esopt[0].generations, esopt[0].tasks_per_direction) == (8, 70, 8)
    assert es.alpha == 2.5e-4 and es.shaping == "zscore" and not es.antithetic
    sigma = es.sigma
    assert (sigma.kind, sigma.sigma_0, sigma.sigma_T, sigma.generations) == (
        "constant", 1.5e-3, 1.5e-3, 70)
    assert esopt[0].kept_generations() == [0, 10, 20, 30, 40, 50, 60, 70]


def test_tiny_scale_trains_on_train_and_evaluates_on_test():
    spec = next(s for s in run_specs(scale("web")) if s.method == "esopt")
    assert spec.env_kwargs["split"] == "train" and spec.eval_env_kwargs["split"] == "test"
    assert spec.env_kwargs["max_turns"] == spec.eval_env_kwargs["max_turns"] == spec.horizon
    train = {t.id for t in make_env("web", **spec.env_kwargs).tasks}
    test = make_env("web", **spec.eval_env_kwargs).tasks
    assert not train & {t.id for t in test}
    # Indexed tasks: the held-out evaluation takes the first N test tasks, each once.
    assert eval_tasks(spec.env, spec.eval_env_kwargs, 8) == list(range(8))
    assert eval_tasks(spec.env, spec.eval_env_kwargs, 10_000) == list(range(len(test)))


def _write(spec, rel, successes):
    path = Path(spec.run_dir) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([{"task_seed": i, "success": ok}
                                         for i, ok in enumerate(successes)]), path)
    return path


def test_tables_4_and_12_and_figure_10_from_evaluation_files(tmp_path):
    cfg = scale("web")
    cfg["web"]["seeds"] = [0, 1]
    specs = run_specs(cfg)
    tasks = make_env("web", **specs[0].eval_env_kwargs).tasks[:8]
    sites = [t.site for t in tasks]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for s in specs:
            if s.method == "base":  # No Skill: nothing solved; Trace2Skill: the first task
                _write(s, "final/eval.parquet", [False] * 8)
                _write(s, "skill/eval.parquet", [True] + [False] * 7)
            else:  # ESOpt: seed 0 solves the forum tasks, seed 1 everything
                fin = [site == "forum" or s.seed == 1 for site in sites]
                for g in (1, 2):
                    _write(s, f"eval/gen{g:03d}.parquet", [False] * 8)
                _write(s, "eval/gen003.parquet", fin)
                _write(s, "final/eval.parquet", fin)
        assert site_successes(f"results/web/h{specs[0].horizon}/base/seed0/skill/eval.parquet",
                              specs[0].eval_env_kwargs)[sites[0]][0] is True
        header, rows = table4(specs)
        assert header[:7] == ["Turns", "Condition", "Reddit", "GitLab", "CMS", "Map", "OSS"]
        by_label = {r[1]: r for r in rows}
        assert list(by_label) == ["No Skill", "Agentic ESOpt + No Skill", "Trace2Skill"]
        n_forum = sites.count("forum")
        assert set(sites) == {"forum", "gitlab", "cms", "map", "shop"}  # any 8 span sites
        esopt = by_label["Agentic ESOpt + No Skill"]
        assert esopt[2] == "100.00 ± 0.00"  # forum: solved by both seeds
        mean = (100 * n_forum / 8 + 100) / 2
        assert esopt[7] == f"{mean:.2f} ± {100 - mean:.2f}" and esopt[8:] == ["8", "2"]
        assert by_label["No Skill"][7] == "0.00 ± 0.00"
        _, rows12 = table12(specs)
        assert [r[3] for r in rows12] == ["+0.00", f"{mean:+.2f}", "+12.50"]
        png = figure10(specs, tmp_path / "fig")[1]
        assert png.exists() and png.stat().st_size > 1000
    finally:
        os.chdir(cwd)


def test_figure10_curve_starts_at_the_base_evaluation(tmp_path):
    from esopt.report.web_report import success_curve

    specs = run_specs(scale("web"))
    base, esopt = (next(s for s in specs if s.method == m) for m in ("base", "esopt"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        _write(base, "final/eval.parquet", [True, False, False, False])
        for g, k in ((1, 2), (3, 4)):
            _write(esopt, f"eval/gen{g:03d}.parquet", [True] * k + [False] * (4 - k))
        assert success_curve(esopt, base) == [(0, 25.0), (1, 50.0), (3, 100.0)]
        assert success_curve(replace(esopt, keep_every=3), None) == [(3, 100.0)]
    finally:
        os.chdir(cwd)


def test_the_evaluation_stage_plays_web_episodes_with_a_tiny_model(tiny_dir, tmp_path):
    from esopt.chat import SamplingParams
    from esopt.pipeline.stages import evaluate_checkpoint
    from esopt.report.results import eval_summary

    spec = next(s for s in run_specs(scale("web")) if s.method == "base")
    spec = replace(spec, model=str(tiny_dir), eval_tasks=5, eval_decoder=SamplingParams(
        max_new_tokens=8, temperature=1.0), runtime={"eval_threads": 1})
    out = tmp_path / "eval.parquet"
    summary = evaluate_checkpoint(spec, str(tiny_dir), 0, str(out))
    assert summary.failed == 0 and summary.success_mean == 0.0  # random weights
    table = pq.read_table(out).to_pylist()
    assert spec.eval_repeats == 2  # the scale's repeats: every task played twice, in order
    assert [r["task_seed"] for r in table] == [0, 1, 2, 3, 4] * spec.eval_repeats
    assert all(r["num_turns"] == spec.horizon for r in table)  # the budget ran out
    assert eval_summary(out).success_mean == 0.0
    assert set(site_successes(out, spec.eval_env_kwargs)) == {"all", "forum", "gitlab", "cms",
                                                              "map", "shop"}
