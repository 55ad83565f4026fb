"""Figure 7 (S = p^H* and the runs' per-turn success), the ES training-reward figure and
Figure 6 (landscapes) from synthetic run outputs: the numbers drawn, not just the files."""

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import esopt.report.figures as figures
import esopt.report.landscape as landscape
from esopt.pipeline.config import run_specs
from esopt.report.figures import figure7, horizon_points, train_reward_figure
from esopt.report.landscape import figure6, gaussian_smooth, read_landscape
from esopt.report.results import correct_turns
from esopt.runtime.atomic import write_parquet_atomic
from tests.pipeline.test_config import base_config
from tests.support.records import eval_summary_json


def _turns(cells_correct):
    """An episode's turns whose Sudoku info holds these cells_correct values (None: the
    environment raised on that turn)."""
    return [{"completion": "r1c1=1", "prompt_tokens": 1, "completion_tokens": 1,
             "reward": 0.0, "info": json.dumps({"error": "boom"} if c is None else
                                               {"parsed": True, "valid": True,
                                                "cells_correct": c})}
            for c in cells_correct]


# H*=2 episodes: 2 of 3 correct (a wrong but valid move, then both cells), 0 of 2, 2 of 3
# (an overwrite of a correct cell undoes it: not correct, the redo is), 0 of 1 (a crash).
EPISODES = [[1, 1, 2], [0, 0], [1, 0, 1], [None]]


def _write_eval(run_dir, per_repeat, episodes):
    summary = {"generation": 0, "success_mean": float(np.mean(per_repeat)),
               "success_std": 0.0, "per_repeat": per_repeat, "peak_memory_mb": 1.0,
               "failed": 0}
    table = pa.table({"success": [False] * len(episodes),
                      "turns": [_turns(e) for e in episodes]})
    write_parquet_atomic(table, run_dir / "final" / "eval.parquet",
                         {"summary": eval_summary_json(**summary)})


@pytest.fixture()
def specs(tmp_path, monkeypatch):
    cfg = base_config()
    cfg["sudoku"].update(methods=["base", "vanilla_es", "esopt", "grpo"], seeds=[0, 1])
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    for s in specs:
        run = tmp_path / s.run_dir
        # H*=2, esopt: 8 of 12 turns correct (seed 0), 6 of 6 (seed 1); the others:
        # EPISODES (4 of 9). H*=1: 3 of 6.
        episodes = EPISODES
        if s.method == "esopt":
            episodes = [[1, 2]] * 3 + ([[0, 1, 1]] * 2 if s.seed == 0 else [])
        if s.horizon == 1:
            episodes = [[1]] * 3 + [[0, 0, 0]]
        _write_eval(run, [0.5, 0.25] if (s.method, s.seed) == ("esopt", 0) else [0.25],
                    episodes)
        if s.method == "base":
            continue
        steps = [1, 2, 3]
        write_parquet_atomic(pa.table({
            "step": steps, "turns": [1.5, 1.2, 1.0], "peak_memory_mb": [1.0] * 3,
            "flops": [1.0] * 3, "reward_mean": [0.2, 0.4, 0.5],
            **({"reward_std": [np.nan] * 3, "reward_min": [np.nan] * 3,
                "reward_max": [np.nan] * 3} if s.method == "grpo" else
               {"reward_std": [0.1, 0.2, 0.0], "reward_min": [0.0, 0.1, 0.5],
                "reward_max": [0.5, 0.75, 0.5]})}), run / "ledger.parquet")
    return specs


def test_correct_turns_count_the_moves_that_fill_a_cell_with_its_value(tmp_path):
    _write_eval(tmp_path, [0.0], EPISODES)
    assert correct_turns(tmp_path / "final" / "eval.parquet") == (4, 9)
    # Turns without Sudoku's cells_correct (another environment): no estimate.
    write_parquet_atomic(pa.table({"turns": [[{"info": json.dumps({"valid": True})}]]}),
                         tmp_path / "other.parquet")
    assert correct_turns(tmp_path / "other.parquet") == (0, 0)


def test_horizon_points_pool_seeds_and_predict_p_hat_to_the_h(specs):
    points = {(p["method"], p["horizon"]): p for p in horizon_points(specs)}
    esopt = points[("esopt", 2)]
    # Turns pooled over the seeds' episodes: (8 + 6) / (12 + 6), not the mean of 2/3 and 1.
    assert esopt["p_hat"] == pytest.approx(14 / 18) and esopt["turns"] == 18
    assert esopt["predicted"] == pytest.approx((14 / 18) ** 2)
    assert esopt["success"] == pytest.approx(1 / 3)  # seed 0 repeats 0.5, 0.25; seed 1 0.25
    assert points[("base", 2)]["p_hat"] == pytest.approx(4 / 9)
    assert points[("grpo", 1)]["predicted"] == pytest.approx(0.5)


def _captured(monkeypatch, module):
    """Figures that `module.save_figure` was handed (still drawn on, before closing)."""
    seen = []
    real = module.save_figure

    def keep(fig, out_dir, stem, **kw):
        seen.append(fig)
        return real(fig, out_dir, stem, **kw)

    monkeypatch.setattr(module, "save_figure", keep)
    return seen


def test_figure7_left_panel_draws_p_to_the_h_and_the_measured_points(specs, tmp_path,
                                                                     monkeypatch):
    seen = _captured(monkeypatch, figures)
    paths = figure7(specs, tmp_path / "figures")
    assert all(p.stat().st_size > 1000 for p in paths)
    left = seen[0].axes[0]
    curves = {round(float(line.get_ydata()[1]) ** 0.5, 6): line for line in left.get_lines()
              if len(line.get_xdata()) == 15}
    assert sorted(curves) == [0.5, 0.7, 0.9, 0.95, 0.99]
    # The paper's example: p = 0.95 gives S = 0.774, 0.599, 0.463 at H* = 5, 10, 15.
    s95 = curves[0.95].get_ydata()
    assert [round(float(s95[h - 1]), 3) for h in (5, 10, 15)] == [0.774, 0.599, 0.463]
    markers = [line for line in left.get_lines() if line.get_marker() == "o"]
    drawn = sorted(round(float(y), 6) for line in markers for y in line.get_ydata())
    expected = sorted(round(v, 6) for p in horizon_points(specs)
                      for v in (p["success"], p["predicted"]))
    assert drawn == expected
    assert len(seen[0].axes) == 3  # left + one turns panel per H*


def test_train_reward_figure_draws_mean_band_and_extremes_of_the_es_runs(specs, tmp_path,
                                                                         monkeypatch):
    seen = _captured(monkeypatch, figures)
    paths = train_reward_figure(specs, tmp_path / "figures")
    assert [p.name for p in paths] == ["train_reward.pdf", "train_reward.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    ax = seen[0].axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert "Agentic ESOpt" in labels and "Vanilla ES" in labels
    assert not any("GRPO" in label for label in labels)  # ES runs only
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(0.1) and band[:, 1].max() == pytest.approx(0.6)
    ys = sorted(tuple(np.round(line.get_ydata(), 6)) for line in ax.get_lines())
    assert (0.0, 0.1, 0.5) in ys and (0.5, 0.75, 0.5) in ys and (0.2, 0.4, 0.5) in ys


def test_train_reward_figure_has_a_panel_per_experiment(tmp_path, monkeypatch):
    cfg = base_config()
    cfg["experiments"] = ["sudoku", "countdown"]
    cfg["sudoku"].update(horizons=[1], methods=["esopt"])
    cfg["countdown"]["methods"] = ["esopt"]
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    for s, mean in zip(specs, ([0.2, 0.3], [0.6, 0.9]), strict=True):
        write_parquet_atomic(pa.table({"step": [1, 2], "reward_mean": mean,
                                       "reward_std": [0.0, 0.0], "reward_min": mean,
                                       "reward_max": mean}),
                             tmp_path / s.run_dir / "ledger.parquet")
    seen = _captured(monkeypatch, figures)
    train_reward_figure(specs, tmp_path / "figures")
    sudoku, countdown = seen[0].axes
    assert (sudoku.get_title(), countdown.get_title()) == ("Sudoku, H*=1", "Countdown")
    drawn = lambda ax: {tuple(np.round(line.get_ydata(), 6)) for line in ax.get_lines()}  # noqa: E731
    assert (0.2, 0.3) in drawn(sudoku) and (0.6, 0.9) not in drawn(sudoku)
    assert (0.6, 0.9) in drawn(countdown) and (0.2, 0.3) not in drawn(countdown)


def test_gaussian_smoothing_is_a_renormalised_nan_aware_kernel_mean():
    flat = np.full((5, 5), 0.25)
    assert np.allclose(gaussian_smooth(flat, 1.0), 0.25)  # edges too: renormalised
    v = np.arange(9, dtype=float).reshape(3, 3)
    assert np.allclose(gaussian_smooth(v, 1e-3), v)  # a vanishing kernel: the raw grid
    v[1, 1] = np.nan
    out = gaussian_smooth(v, 0.75)
    # The explicit 2-D weighted mean over the finite cells at (0, 2).
    w = np.exp(-((np.arange(3)[:, None] - 0) ** 2 + (np.arange(3)[None, :] - 2) ** 2)
               / (2 * 0.75**2))
    ok = np.isfinite(v)
    assert out[0, 2] == pytest.approx((w * np.where(ok, v, 0)).sum() / (w * ok).sum())
    assert np.isfinite(out[1, 1]) and out[1, 1] == pytest.approx(4.0)  # symmetric fill
    assert np.isnan(gaussian_smooth(np.full((3, 3), np.nan))).all()


def _landscape(path, spec, rewards, **settings):
    axis = [-2.0, 0.0, 2.0]
    table = pa.table({"x": [x for x in axis for _ in axis], "y": axis * 3,
                      "reward": rewards})
    write_parquet_atomic(table, path, {"config": spec.to_json(), "landscape": json.dumps(
        {"grid": 3, "span": 2.0, "tasks": 2, "sigma": spec.es.sigma(0), **settings})})


def test_figure6_marks_the_best_and_worst_raw_points(specs, tmp_path, monkeypatch):
    esopt = [s for s in specs if s.method == "esopt" and s.seed == 0]  # H* = 1, 2
    # Rows x = -2, 0, 2 (outer) by y = -2, 0, 2: best at (2, -2), worst tied at (-2, -2)
    # and (0, 0): the one nearest the centre, (0, 0).
    _landscape(tmp_path / "h1.parquet", esopt[0],
               [0.0, 0.5, 0.5, 0.5, 0.0, 0.5, 1.0, 0.5, math.nan], centre="base")
    _landscape(tmp_path / "h2.parquet", esopt[1], [0.25] * 9)  # older: no centre recorded
    land = read_landscape(tmp_path / "h1.parquet")
    assert land.reward_xy[2, 0] == 1.0 and math.isnan(land.reward_xy[2, 2])
    assert land.best == (2.0, -2.0) and land.worst == (0.0, 0.0)
    seen = _captured(monkeypatch, landscape)
    paths = figure6([tmp_path / "h2.parquet", tmp_path / "h1.parquet"], tmp_path / "figures")
    assert [p.name for p in paths] == ["fig6.pdf", "fig6.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    ax = seen[0].axes[0]  # H*=1 first
    assert ax.get_title().startswith("H*=1") and "around the base model" in ax.get_title()
    marks = {line.get_label(): (float(line.get_xdata()[0]), float(line.get_ydata()[0]))
             for line in ax.get_lines()}
    assert marks == {"base model": (0.0, 0.0), "best (raw)": (2.0, -2.0),
                     "worst (raw)": (0.0, 0.0)}
    older = seen[0].axes[1]  # a file from before the option was centred on the final one
    assert f"around gen {esopt[1].generations}" in older.get_title()
    assert "final checkpoint" in [line.get_label() for line in older.get_lines()]
    shown = ax.get_images()[0].get_array()
    assert shown.shape == (3, 3)
    # imshow rows are y: the point (x=2, y=-2) is row 0, column 2.
    assert shown[0, 2] == pytest.approx(gaussian_smooth(land.reward_xy)[2, 0])


def test_report_pdf_adds_the_training_reward_and_figure6_pages_after_figure7(
        tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    import esopt.report.pdf as pdf

    tables, figs = tmp_path / "tables", tmp_path / "figures"
    tables.mkdir()
    figs.mkdir()
    for name in ("table1", "table2", "table7"):
        (tables / f"{name}.csv").write_text("Method,H*=1\nBase model,0.00\n")
    for name in ("fig3", "fig7", "train_reward", "fig6"):
        plt.imsave(figs / f"{name}.png", np.zeros((4, 4)))
    pages = []
    real = pdf._figure_page
    monkeypatch.setattr(pdf, "_figure_page", lambda p, title, png, caption: (
        pages.append((title, png.name, caption[:20])), real(p, title, png, caption)))
    captions = Path(__file__).parents[2] / "workflow" / "report"
    from esopt.report.summary import FirstPage

    page = FirstPage("1 run", "Agentic ESOpt at H*=1: +1.0 points", (["Method"], [["Base"]]))
    out = pdf.build_report(tables, figs, captions, tmp_path / "report.pdf", page)
    assert [p[1] for p in pages] == ["fig3.png", "fig7.png", "train_reward.png", "fig6.png"]
    assert pages[2][2].startswith("Training reward") and pages[3][2].startswith("Reward land")
    assert b"/Count 8" in out.read_bytes()  # title page + 3 tables + 4 figures
    (figs / "fig6.png").unlink()  # no landscapes: no Figure 6 page
    pages.clear()
    pdf.build_report(tables, figs, tmp_path, tmp_path / "report2.pdf", page)
    assert [p[1] for p in pages] == ["fig3.png", "fig7.png", "train_reward.png"]
