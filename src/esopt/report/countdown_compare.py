"""The Countdown comparison (issue 37): every method on the same held-out tasks at matched
training FLOPs. Table 1: held-out success with its CI, final minus base and ESOpt minus
the method (paired by seed and task), measured peak memory of training; Table 2: training
FLOPs, episodes, wall-clock and worker time; a figure of held-out success against the
cumulative training FLOPs at each kept checkpoint, one line per method."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from esopt.pipeline.spec import RunSpec  # noqa: E402
from esopt.report.figures import COLORS, save_figure  # noqa: E402
from esopt.report.results import eval_curve, ledger, peak_memory_mb  # noqa: E402
from esopt.report.summary import method_results, points_ci  # noqa: E402
from esopt.report.tables import (  # noqa: E402
    METHOD_LABELS,
    Table,
    _by_method,
    duration,
    si,
    training_cost,
    write_table,
)

ENV = "countdown"


def compare_runs(specs: list[RunSpec]) -> list[RunSpec]:
    """The runs the comparison reads: Countdown's, evaluation-only models left out."""
    return [s for s in specs if s.env == ENV and not s.eval_model]


def _label(method: str) -> str:
    return METHOD_LABELS[method].lstrip("+ ")


def _memory(runs: list[RunSpec]) -> str:
    """The largest measured peak of the runs' training phase (base: its evaluation)."""
    mb = max(peak_memory_mb(s) for s in runs)
    if np.isnan(mb):
        return "–"
    return f"{mb / 1024:.2f} GB" + (" (evaluation)" if not runs[0].generations else "")


def countdown_table1(specs: list[RunSpec]) -> Table:
    """One row per (H*, method): seeds x tasks, held-out success x100 with its cluster-
    bootstrap 95% CI (seeds x tasks), final minus base and ESOpt minus the method (each
    paired by seed and task, 95% CI, x100) and the measured peak memory of training."""
    runs = compare_runs(specs)
    by_method = _by_method(runs)
    header = ["Method", "H*", "Seeds x tasks", "Held-out success [95% CI]",
              "Final - base [95% CI]", "ESOpt - method [95% CI]",
              "Peak memory (training, measured)"]
    rows = []
    for r in method_results(runs):
        at_h = [s for s in by_method[r.method] if s.horizon == r.horizon]
        s = r.success
        rows.append([_label(r.method), str(r.horizon), f"{r.seeds} x {r.tasks}",
                     f"{100 * s.mean:.1f} [{100 * s.lo:.1f}, {100 * s.hi:.1f}]",
                     points_ci(r.vs_base), points_ci(r.vs_esopt, r.seeds), _memory(at_h)])
    return header, rows


def countdown_table2(specs: list[RunSpec]) -> Table:
    """One row per (H*, trained method), means over its seeds: updates (ES generations, RL
    steps), training episodes, training FLOPs and their ratio to ESOpt's, wall-clock and
    worker time (tables.training_cost, from the ledgers)."""
    runs = compare_runs(specs)
    header = ["Method", "H*", "Seeds", "Updates", "Episodes", "Training FLOPs",
              "FLOPs / ESOpt's", "Wall-clock", "Worker time"]
    costs = {}
    for method, method_runs in _by_method(runs).items():
        if method == "base":
            continue
        for h in sorted({s.horizon for s in method_runs}):
            at_h = [s for s in method_runs if s.horizon == h]
            flops, wall_s, worker_s, episodes = (
                float(np.mean(c)) for c in zip(*(training_cost(s) for s in at_h), strict=True))
            costs[(method, h)] = (at_h, flops, wall_s, worker_s, episodes)
    rows = []
    for (method, h), (at_h, flops, wall_s, worker_s, episodes) in costs.items():
        esopt = costs.get(("esopt", h))
        ratio = f"{flops / esopt[1]:.2f}" if esopt and esopt[1] > 0 else "–"
        rows.append([_label(method), str(h), str(len(at_h)), str(at_h[0].generations),
                     f"{episodes:.0f}", si(flops, "FLOPs"), ratio, duration(wall_s),
                     duration(worker_s)])
    return header, rows


def flops_curve(spec: RunSpec, specs: list[RunSpec]) -> list[tuple[float, float]]:
    """(cumulative training FLOPs, held-out success) at each evaluated checkpoint of a
    run: generation g's FLOPs are its ledger's first g rows (0 for the base model)."""
    if not spec.generations:
        return []
    cumulative = np.concatenate([[0.0], np.cumsum(ledger(spec)["flops"])])
    return [(float(cumulative[g]), mean) for g, mean, _ in eval_curve(spec, specs)
            if g < len(cumulative)]


def countdown_figure(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Held-out success (x100, mean over seeds) against cumulative training FLOPs at the
    kept checkpoints, one line per trained method; the base model as a dashed line."""
    runs = compare_runs(specs)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), constrained_layout=True)
    for method, method_runs in _by_method(runs).items():
        if method == "base":
            ax.axhline(100 * np.mean([c[1] for s in method_runs
                                      for c in eval_curve(s, runs)]),
                       color=COLORS["base"], ls="--", lw=1, label="Base model")
            continue
        curves = [flops_curve(s, runs) for s in method_runs]
        points = min(len(c) for c in curves)  # every seed has the same kept checkpoints
        flops = np.mean([[p[0] for p in c[:points]] for c in curves], axis=0)
        success = np.mean([[p[1] for p in c[:points]] for c in curves], axis=0)
        ax.plot(flops, 100 * success, marker="o", ms=4, color=COLORS[method],
                label=f"{_label(method)} ({len(method_runs)} seed"
                      f"{'s' if len(method_runs) > 1 else ''})")
    ax.set_xlabel("cumulative training FLOPs")
    ax.set_ylabel("held-out success (x100)")
    ax.set_title("Countdown: held-out success against training compute")
    ax.legend(fontsize=7)
    return save_figure(fig, out_dir, "countdown_flops")


def write_countdown_compare(specs: list[RunSpec], tables_dir: str | Path,
                            figures_dir: str | Path) -> None:
    """results/tables/countdown_table{1,2}.{csv,md,tex} and
    results/figures/countdown_flops.{pdf,png}."""
    write_table(countdown_table1(specs), tables_dir, "countdown_table1")
    write_table(countdown_table2(specs), tables_dir, "countdown_table2")
    countdown_figure(specs, figures_dir)
