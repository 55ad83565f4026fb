"""The report's first page from synthetic runs: paired differences, seeds pooled as tasks."""


import pyarrow as pa
import pytest

from esopt.pipeline.config import run_specs
from esopt.report.summary import (
    config_hash,
    first_page,
    headline,
    method_results,
    summary_rows,
)
from esopt.runtime.atomic import write_parquet_atomic
from tests.pipeline.test_config import base_config
from tests.support.records import write_eval_file


def _final(run_dir, tasks, success):
    write_eval_file(run_dir / "final" / "eval.parquet", {"task_seed": tasks, "success": success},
                    success_mean=sum(success) / len(success), peak_memory_mb=1.0)


@pytest.fixture()
def specs(tmp_path, monkeypatch):
    cfg = base_config()
    cfg["sudoku"]["seeds"] = [0, 1]
    cfg["sudoku"]["horizons"] = [1]
    cfg["sudoku"]["methods"] = ["base", "esopt", "vanilla_es"]
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    tasks = list(range(100, 164))  # 64 held-out tasks per seed
    for s in specs:
        base = [t % 2 == 0 for t in tasks]  # half the boards are easy for every model
        if s.method == "esopt":  # solves 8 more boards per seed, loses none
            success = [b or (t % 2 == 1 and t < 116) for t, b in zip(tasks, base, strict=True)]
        elif s.method == "vanilla_es":  # trades 4 boards for 4 others
            success = [(not b) if t < 108 else b for t, b in zip(tasks, base, strict=True)]
        else:
            success = base
        _final(tmp_path / s.run_dir, tasks, success)
        if s.method != "base":
            write_parquet_atomic(pa.table({"step": [1, 2, 3],
                                           "reward_mean": [0.25, 0.5, 0.25 + 0.5 * s.seed]}),
                                 tmp_path / s.run_dir / "ledger.parquet")
    return specs


def test_differences_are_paired_by_task_and_seeds_are_clusters(specs):
    by = {r.method: r for r in method_results(specs)}
    assert [r.method for r in method_results(specs)] == ["base", "vanilla_es", "esopt"]
    base, esopt, vanilla = by["base"], by["esopt"], by["vanilla_es"]
    # Both seeds play the same 64 boards: 2 seeds x 64 boards, not 128 tasks.
    assert base.vs_base is None and base.tasks == 64 and base.seeds == 2
    assert (base.success.n, base.success.seeds) == (64, 2)
    assert base.success.mean == pytest.approx(0.5)
    assert esopt.vs_base.mean == pytest.approx(16 / 128)
    assert esopt.vs_base.excludes_zero  # paired: the easy boards cancel
    assert esopt.success.lo < base.success.hi  # unpaired intervals overlap
    assert vanilla.vs_base.mean == pytest.approx(0.0)
    assert not vanilla.vs_base.excludes_zero
    assert esopt.train_reward == (0.25, pytest.approx(0.5))  # last: mean of 0.25, 0.75


def test_first_page_rows_and_headline_say_what_the_ci_shows(specs):
    results = method_results(specs)
    header, rows = summary_rows(results)
    by = {r[2]: r for r in rows}
    assert by["Agentic ESOpt"][3] == "2 x 64" and by["Agentic ESOpt"][4] == "success"
    assert by["Agentic ESOpt"][6].startswith("+12.5 [") and by["Agentic ESOpt"][6].endswith("*")
    assert by["Base"][6] == "–"
    text = headline(results)
    assert ("Agentic ESOpt at H*=1 (sudoku): +12.5 success points vs base [" in text
            and "] over 2 seeds x 64 boards: better than base." in text)
    assert "better than base" in text and "Vanilla ES at H*=1 (sudoku): +0.0" in text
    assert "inside the noise" in text


def test_first_page_says_what_ran_and_carries_the_rows_and_headline(specs):
    page = first_page(specs)
    assert page.ran.startswith("6 runs; model resources/models/smollm2-135m-instruct; "
                               "experiments ['sudoku']; horizons [1]; methods ")
    assert f"config hash {config_hash(specs)};" in page.ran
    results = method_results(specs)
    assert page.table == summary_rows(results) and page.headline == headline(results)
    assert first_page([]).ran == "no runs"


def test_config_hash_ignores_runtime_settings(specs):
    from dataclasses import replace

    h = config_hash(specs)
    assert config_hash([replace(s, runtime={"workers": 7}) for s in specs]) == h
    assert config_hash([replace(s, eval_tasks=s.eval_tasks + 1) for s in specs]) != h


def test_docvqa_shows_anls_not_exact_match(tmp_path, monkeypatch):
    """Issue 36, item 6: the paper's DocVQA metric is ANLS; the first page shows it (the
    eval file's `success` is exact match)."""
    cfg = base_config()
    cfg.update(experiments=["docvqa"], docvqa={
        "horizons": [3], "methods": ["base", "esopt"], "seeds": [0],
        "env_options": {"data": "synthetic:4:0"}})
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    anls = {"base": [0.5, 0.25, 0.0, 0.75], "esopt": [0.75, 0.5, 0.25, 1.0]}
    for s in specs:
        values = anls[s.method]
        write_eval_file(tmp_path / s.run_dir / "final" / "eval.parquet",
                        {"task_seed": [0, 1, 2, 3], "success": [False] * 4, "anls": values,
                         "accuracy": [0.0] * 4}, success_mean=0.0, peak_memory_mb=1.0)
    results = {r.method: r for r in method_results(specs)}
    assert results["base"].success.mean == pytest.approx(0.375)
    assert results["esopt"].vs_base.mean == pytest.approx(0.25)
    _, rows = summary_rows(list(results.values()))
    assert [r[4:6] for r in rows] == [["ANLS", "37.5 [12.5, 62.5]"],
                                      ["ANLS", rows[1][5]]] and rows[1][5].startswith("62.5")
    assert "+25.0 ANLS points vs base" in headline(list(results.values()))
    assert "x 4 documents" in headline(list(results.values()))


def test_first_page_has_esopt_minus_each_method_with_its_ci(specs):
    """Issue 37: where ESOpt ran beside another method, the first page gives ESOpt minus
    that method, paired by seed and task. ESOpt solves boards 100, 102, 104, 106 (which
    vanilla ES gave up) and 109-115 odd (which it never got): +8 of 64 per seed."""
    results = method_results(specs)
    by = {r.method: r for r in results}
    assert by["esopt"].vs_esopt is None
    assert by["vanilla_es"].vs_esopt.mean == pytest.approx(8 / 64)
    assert by["vanilla_es"].vs_esopt.seeds == 2 and by["vanilla_es"].vs_esopt.excludes_zero
    assert by["base"].vs_esopt.mean == pytest.approx(by["esopt"].vs_base.mean)
    header, rows = summary_rows(results)
    assert header[-1] == "ESOpt minus [95% CI]"
    row = {r[2]: r for r in rows}
    assert row["Vanilla ES"][-1].startswith("+12.5 [") and row["Vanilla ES"][-1].endswith("*")
    assert row["Agentic ESOpt"][-1] == "–"
    text = headline(results)
    assert ("Agentic ESOpt minus Vanilla ES at H*=1 (sudoku): +12.5 success points [" in text
            and "] over 2 seeds x 64 boards: ESOpt better." in text)
    assert "Agentic ESOpt minus Base" not in text  # that is ESOpt's own line vs base


def test_first_page_has_no_esopt_column_without_a_rival(specs):
    header, rows = summary_rows(method_results([s for s in specs
                                                if s.method in ("base", "esopt")]))
    assert header[-1] == "Train reward first -> last (k gens)"
    assert all(len(r) == len(header) for r in rows)
