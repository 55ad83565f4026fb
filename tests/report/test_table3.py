"""Table 3 (math and DocVQA columns), Figure 8 (best-of-k) and Figure 9 (trajectory length
during DocVQA training) from small synthetic evaluation files and ledgers: the numbers."""

import numpy as np
import pyarrow as pa
import pytest

from esopt.pipeline.config import run_specs
from esopt.report import math_report
from esopt.report.math_report import figure8, figure9, score_matrix, table3, trajectory_lengths
from esopt.report.stats import cluster_bootstrap
from esopt.runtime.atomic import write_parquet_atomic
from tests.report.test_figures import _captured

# (tasks, 4 samples) per run: DocVQA ANLS and exact match, math success.
ANLS = {"base": [[0.0, 0.5, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]],
        "esopt": [[1.0, 1.0, 0.5, 1.0], [0.0, 0.6, 0.0, 0.0]],
        "grpo": [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.8]]}
MATH = {"base": [[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1]],
        "esopt": [[1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 1]],
        "grpo": [[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]}


def _eval_table(scores, column_values):
    rows = {"task_seed": [], "repeat": [], "success": [], **{c: [] for c in column_values}}
    for task, row in enumerate(scores):
        for k, v in enumerate(row):
            rows["task_seed"].append(100 + task)  # task seeds need not be 0..N-1
            rows["repeat"].append(k)
            for c, f in column_values.items():
                rows[c].append(f(v))
            rows["success"].append(bool(v == 1.0))
    return pa.table(rows)


@pytest.fixture()
def specs(tmp_path, monkeypatch):
    cfg = {"model": "tiny-random", "experiments": ["math", "docvqa"],
           "math": {"skills": True, "horizons": [2], "methods": ["base", "esopt", "grpo"],
                    "env_options": {"data": "generated:20:0"},
                    "eval": {"tasks": 3, "repeats": 4}},
           "docvqa": {"horizons": [3], "methods": ["base", "esopt", "grpo"],
                      "env_options": {"data": "synthetic:4:0"},
                      "es": {"generations": 3}, "rl": {"steps": 5},
                      "eval": {"tasks": 2, "repeats": 4}}}
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)  # run dirs are relative, as in the workflow
    for s in specs:
        final = tmp_path / s.run_dir / "final" / "eval.parquet"
        if s.env == "docvqa":
            table = _eval_table(ANLS[s.method],
                                {"anls": float, "accuracy": lambda v: float(v == 1)})
        else:
            table = _eval_table(MATH[s.method], {})
        write_parquet_atomic(table, final)
        if s.env == "docvqa" and s.method != "base":
            # ESOpt: 3 generations at 3.0, 2.5, 2.0 turns; GRPO: 5 steps at 1.0 .. 3.0
            turns = [3.0, 2.5, 2.0] if s.method == "esopt" else [1.0, 1.5, 2.0, 2.5, 3.0]
            write_parquet_atomic(pa.table({"step": list(range(1, len(turns) + 1)),
                                           "turns": turns}),
                                 tmp_path / s.run_dir / "ledger.parquet")
    return specs


def test_score_matrix_orders_tasks_and_repeats(specs):
    s = next(s for s in specs if (s.env, s.method) == ("docvqa", "esopt"))
    m = score_matrix(f"{s.run_dir}/final/eval.parquet", "anls")
    assert m.tolist() == ANLS["esopt"]
    assert score_matrix(f"{s.run_dir}/final/eval.parquet", "accuracy").tolist() == [
        [1, 1, 0, 1], [0, 0, 0, 0]]


def _means(row):
    """The mean±std part of each cell (the CI follows in brackets)."""
    return [c.split(" [")[0] for c in row]


def test_table3_merges_math_and_docvqa_columns(specs):
    header, rows = table3(specs)
    assert header == ["Condition", "math H2 Mean@4 (%)", "math H2 Pass@4 (%)",
                      "docvqa H3 ANLS Mean@4", "docvqa H3 ANLS Max@4",
                      "docvqa H3 Acc. Mean@4 (%)", "docvqa H3 Acc. Pass@4 (%)"]
    by = {r[0]: _means(r[1:]) for r in rows}
    cis = {r[0]: r[1:] for r in rows}
    assert list(by) == ["No Skill", "Agentic GRPO + No Skill", "Agentic ESOpt + No Skill",
                        "Held-out tasks x samples"]
    # The CI: the cluster bootstrap of the per-problem values (one seed: over problems).
    per_problem = np.array([MATH["base"]]).mean(axis=2)  # (1 seed, 3 problems)
    ci = cluster_bootstrap(per_problem)
    assert cis["No Skill"][0] == f"33.33±0.00 [{100 * ci.lo:.2f}, {100 * ci.hi:.2f}]"
    # Hand-computed. Math base: 4 of 12 correct; 2 of 3 problems solved at least once.
    assert by["No Skill"][:2] == ["33.33±0.00", "66.67±0.00"]
    # DocVQA base ANLS: mean (1.5 + 0) / 8; Max@4 mean of maxima (1.0 + 0) / 2.
    # Accuracy: one exact match (the 1.0) of 8; one of two pages matched once.
    assert by["No Skill"][2:] == ["0.1875±0.0000", "0.5000±0.0000", "12.50±0.00",
                                  "50.00±0.00"]
    assert by["Agentic ESOpt + No Skill"] == ["58.33±0.00", "100.00±0.00", "0.5125±0.0000",
                                              "0.8000±0.0000", "37.50±0.00", "50.00±0.00"]
    assert by["Agentic GRPO + No Skill"] == ["8.33±0.00", "33.33±0.00", "0.1000±0.0000",
                                             "0.4000±0.0000", "0.00±0.00", "0.00±0.00"]
    assert by["Held-out tasks x samples"] == ["3x4", "3x4", "2x4", "2x4", "2x4", "2x4"]


def test_table3_without_docvqa_keeps_the_math_columns_only(specs):
    header, rows = table3([s for s in specs if s.env == "math_tool"])
    assert header == ["Condition", "math H2 Mean@4 (%)", "math H2 Pass@4 (%)"]
    assert _means(rows[0][1:]) == ["33.33±0.00", "66.67±0.00"]
    assert [r[0] for r in rows][:3] == ["No Skill", "Agentic GRPO + No Skill",
                                        "Agentic ESOpt + No Skill"]


def test_figure8_has_a_panel_per_metric_with_mean_circles_and_best_of_4_stars(
        specs, tmp_path, monkeypatch):
    seen = _captured(monkeypatch, math_report)
    paths = figure8(specs, tmp_path / "figures")
    assert [p.name for p in paths] == ["fig8.pdf", "fig8.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    axes = seen[0].axes
    assert [ax.get_title() for ax in axes] == ["math H2: success", "docvqa H3: ANLS",
                                               "docvqa H3: accuracy"]
    # Conditions draw in order (No Skill C0, GRPO C1, ESOpt C2): curve, circle, star.
    esopt = {line.get_marker(): (list(line.get_xdata()), list(np.round(line.get_ydata(), 6)))
             for line in axes[1].get_lines() if line.get_color() == "C2"}
    # Curve over k = 1, 2 (4 samples: 8, 16, 32 need more), circle at 1, star at 4.
    # ESOpt page 1 [1, 1, .5, 1]: best of 2 = 1 (every pair holds a 1); page 2 [0, .6, 0, 0]:
    # best of 2 = 0.6 * 3/6 = 0.3; mean 0.65.
    assert esopt["None"] == ([1, 2], [0.5125, 0.65])
    assert esopt["o"] == ([1], [0.5125]) and esopt["*"] == ([4], [0.8])


def test_figure9_draws_turns_per_update_through_the_last_es_generation(specs, tmp_path,
                                                                       monkeypatch):
    seen = _captured(monkeypatch, math_report)
    paths = figure9(specs, tmp_path / "figures")
    assert [p.name for p in paths] == ["fig9.pdf", "fig9.png"]
    ax = seen[0].axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["Agentic ESOpt"].get_xdata()) == [1, 2, 3]
    assert list(lines["Agentic ESOpt"].get_ydata()) == [3.0, 2.5, 2.0]
    # GRPO's 5 steps shown on the common axis through ES's generation 3.
    assert list(lines["Agentic GRPO"].get_xdata()) == [1, 2, 3]
    assert list(lines["Agentic GRPO"].get_ydata()) == [1.0, 1.5, 2.0]
    assert list(lines["turn limit"].get_ydata()) == [3, 3]
    grpo = next(s for s in specs if (s.env, s.method) == ("docvqa", "grpo"))
    assert trajectory_lengths(grpo) == ([1, 2, 3, 4, 5], [1.0, 1.5, 2.0, 2.5, 3.0])


def test_table3_has_dapo_and_aime_columns_from_one_held_out_set(tmp_path, monkeypatch):
    """Issue 36, item 11: the math evaluation plays DAPO and AIME 2026 problems (one file
    each, interleaved); Table 3 gives each its column group, with seeds as clusters."""
    cfg = {"model": "tiny-random", "experiments": ["math"],
           "math": {"skills": True, "horizons": [2], "methods": ["base", "esopt"],
                    "seeds": [0, 1], "env_options": {"data": "generated:20:0"},
                    "eval": {"tasks": 4, "repeats": 2}}}
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    dapo, aime = "BytedTsinghua-SIA/DAPO-Math-17k", "MathArena/aime_2026"
    sources = [dapo, aime, dapo, aime]  # interleaved, as the environment serves them
    for s in specs:
        # Base solves the DAPO problems once in two samples, never an AIME one; ESOpt
        # solves every DAPO sample and, with seed 1 only, one AIME problem.
        rows = {"task_seed": [], "repeat": [], "success": [], "source": []}
        for task, src in enumerate(sources):
            for r in range(2):
                ok = (src == dapo and (s.method == "esopt" or r == 0)) or (
                    s.method == "esopt" and s.seed == 1 and task == 1)
                rows["task_seed"].append(task)
                rows["repeat"].append(r)
                rows["success"].append(ok)
                rows["source"].append(src)
        write_parquet_atomic(pa.table(rows), tmp_path / s.run_dir / "final" / "eval.parquet")
    header, rows = table3(specs)
    assert header == ["Condition", "math H2 DAPO Mean@2 (%)", "math H2 DAPO Pass@2 (%)",
                      "math H2 AIME 2026 Mean@2 (%)", "math H2 AIME 2026 Pass@2 (%)"]
    by = {r[0]: r[1:] for r in rows}
    assert _means(by["No Skill"]) == ["50.00±0.00", "100.00±0.00", "0.00±0.00", "0.00±0.00"]
    # ESOpt on AIME: seed 0 solves nothing, seed 1 one problem of 2 (both samples).
    assert _means(by["Agentic ESOpt + No Skill"]) == [
        "100.00±0.00", "100.00±0.00", "25.00±25.00", "25.00±25.00"]
    assert by["Held-out tasks x samples"] == ["2x2"] * 4
