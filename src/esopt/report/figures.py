"""Figure 3: final Sudoku success by H* (a) and evaluation curves along training (b);
Figure 7: S = p^H* against the measured success and per-turn success (left), turns per
training episode along training, RL vs ES (right); the ES runs' training reward."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from esopt.pipeline.spec import ASYNC_METHODS, ES_METHODS, RL_METHODS, RunSpec  # noqa: E402
from esopt.report.results import correct_turns, eval_curve, ledger  # noqa: E402
from esopt.report.tables import METHOD_LABELS, _by_method, success_stats  # noqa: E402

COLORS = {"base": "#8c8c8c", "vanilla_es": "#4c72b0", "esopt": "#dd8452", "grpo": "#55a868",
          "grpo_b": "#2f6b3c", "ppo": "#c44e52", "copes": "#8172b3", "async_es": "#937860",
          "lowrank_es": "#da8bc3"}


def figure3(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Write fig3.pdf and fig3.png; return their paths."""
    horizons = sorted({s.horizon for s in specs})
    by_method = _by_method(specs)
    fig = plt.figure(figsize=(4 + 3.2 * len(horizons), 3.6), constrained_layout=True)
    grid = fig.add_gridspec(1, 1 + len(horizons), width_ratios=[1.4] + [1] * len(horizons))
    ax = fig.add_subplot(grid[0, 0])
    width = 0.8 / max(1, len(by_method))
    finals: dict[tuple[str, int], float] = {}
    for k, (method, runs) in enumerate(by_method.items()):
        xs, means, stds = [], [], []
        for i, h in enumerate(horizons):
            at_h = [s for s in runs if s.horizon == h]
            if at_h:
                mean, std, _ = success_stats(at_h)
                xs.append(i + (k - (len(by_method) - 1) / 2) * width)
                means.append(mean)
                stds.append(std)
                finals[(method, h)] = mean
        ax.bar(xs, means, width, yerr=stds, capsize=3, label=METHOD_LABELS[method].lstrip("+ "),
               color=COLORS[method])
    # ESOpt's difference from the stronger RL result (from the best other method when no
    # RL method ran), as the paper's red/green annotations.
    rivals = [m for m in by_method if m in RL_METHODS] or [m for m in by_method if m != "esopt"]
    if "esopt" in by_method:
        for i, h in enumerate(horizons):
            others = [v for (m, hh), v in finals.items() if hh == h and m in rivals]
            if (("esopt", h) in finals) and others:
                delta = finals[("esopt", h)] - max(others)
                ax.annotate(f"{delta:+.1f}", (i, -0.12), xycoords=("data", "axes fraction"),
                            ha="center", color="green" if delta >= 0 else "red", fontsize=8)
    ax.set_xticks(range(len(horizons)), [f"H*={h}" for h in horizons])
    ax.set_ylabel("final success rate (x100)")
    ax.set_ylim(0, 100)
    ax.set_title("(a) final success")
    ax.legend(fontsize=7, loc="upper right")
    for i, h in enumerate(horizons):
        axc = fig.add_subplot(grid[0, 1 + i])
        for method, runs in by_method.items():
            if method == "base":
                continue
            for s in (r for r in runs if r.horizon == h):
                curve = eval_curve(s, specs)
                gens = [g for g, _, _ in curve]
                axc.errorbar(gens, [100 * m for _, m, _ in curve],
                             yerr=[100 * sd for _, _, sd in curve], marker="o", ms=3,
                             capsize=2, color=COLORS[method],
                             label=METHOD_LABELS[method].lstrip("+ ") if s.seed == runs[0].seed
                             else None)
        if "base" in by_method:
            base = [s for s in by_method["base"] if s.horizon == h]
            if base:
                axc.axhline(success_stats(base)[0], color=COLORS["base"], ls="--", lw=1,
                            label="Base model")
        axc.set_title(f"({chr(ord('b') + i)}) H*={h}")
        axc.set_ylim(0, 100)
        axc.set_ylabel("held-out success (x100)")
        axc.set_xlabel("update (ES generation / RL step)")
        axc.legend(fontsize=7)
    return save_figure(fig, out_dir, "fig3")


def save_figure(fig, out_dir: str | Path, stem: str, **savefig) -> list[Path]:
    """Write {stem}.pdf and {stem}.png (150 dpi) into out_dir, close the figure, return both."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.pdf", out / f"{stem}.png"]
    for p in paths:
        fig.savefig(p, dpi=150, **savefig)
    plt.close(fig)
    return paths


# Per-turn success rates of the schematic curves S = p^H* (Figure 7, left).
TURN_RATES = (0.5, 0.7, 0.9, 0.95, 0.99)


def horizon_points(specs: list[RunSpec]) -> list[dict]:
    """Per (method, H*): the measured final success (fraction, over seeds x repeats), the
    per-turn success p-hat (correct turns / turns over the final evaluations' episodes,
    results.correct_turns) and its prediction p-hat^H*; p-hat NaN without Sudoku turns."""
    points = []
    for method, runs in _by_method(specs).items():
        for h in sorted({s.horizon for s in runs}):
            at_h = [s for s in runs if s.horizon == h]
            counts = [correct_turns(Path(s.run_dir) / "final" / "eval.parquet") for s in at_h]
            correct, turns = sum(c for c, _ in counts), sum(t for _, t in counts)
            p_hat = correct / turns if turns else float("nan")
            points.append({"method": method, "horizon": h, "success": success_stats(at_h)[0] / 100,
                           "p_hat": p_hat, "predicted": p_hat ** h, "turns": turns})
    return points


def _horizon_panel(ax, specs: list[RunSpec]) -> None:
    """S = p^H* for TURN_RATES over H* = 1 .. max(15, H*), and per method the measured
    success (filled) next to p-hat^H* (open) at each H* run."""
    points = horizon_points(specs)
    hs = np.arange(1, max([15] + [p["horizon"] for p in points]) + 1)
    for p, grey in zip(TURN_RATES, np.linspace(0.75, 0.1, len(TURN_RATES)), strict=True):
        ax.plot(hs, p ** hs, color=str(grey), lw=1)
        # Labelled where the curve crosses S ~ 0.3 (or at the right end): the labels spread.
        at = int(min(hs[-1], max(1, round(np.log(0.3) / np.log(p)))))
        ax.annotate(f"p={p}", (at, p ** at), fontsize=6, color=str(grey), xytext=(2, 2),
                    textcoords="offset points")
    methods = list(dict.fromkeys(p["method"] for p in points))
    for k, method in enumerate(methods):
        dx = (k - (len(methods) - 1) / 2) * 0.12  # side by side at each H*
        mine = [p for p in points if p["method"] == method]
        x = np.array([p["horizon"] for p in mine]) + dx
        color = COLORS[method]
        ax.plot(x, [p["success"] for p in mine], "o", ms=4, color=color,
                label=METHOD_LABELS[method].lstrip("+ "))
        ax.plot(x, [p["predicted"] for p in mine], "o", ms=5, mfc="none", color=color)
        for xi, p in zip(x, mine, strict=True):
            ax.plot([xi, xi], [p["success"], p["predicted"]], color=color, lw=0.6)
    handles, labels = ax.get_legend_handles_labels()
    proxies = [Line2D([], [], ls="", marker="o", color="black", ms=4),
               Line2D([], [], ls="", marker="o", mfc="none", color="black", ms=5)]
    ax.legend(handles + proxies, labels + ["measured success", "p-hat^H* (per-turn)"],
              fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    ax.set_xlim(0.5, hs[-1] + 2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("H* (minimum successful horizon)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("trajectory success S")
    ax.set_title("S = p^H*")


def figure7(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Left: S = p^H* with the runs' measured success and p-hat^H*. Right: turns used per
    training episode at each update (ES: over all directions of the generation; RL: over
    the step's rollouts), one panel per H*, with the minimum H* and the 3H* turn budget
    marked. Writes fig7.pdf and fig7.png."""
    horizons = sorted({s.horizon for s in specs})
    trained = {m: runs for m, runs in _by_method(specs).items() if m != "base"}
    fig = plt.figure(figsize=(4.4 + 3.4 * len(horizons), 3.4), constrained_layout=True)
    grid = fig.add_gridspec(1, 1 + len(horizons), width_ratios=[1.3] + [1] * len(horizons))
    _horizon_panel(fig.add_subplot(grid[0, 0]), specs)
    for i, h in enumerate(horizons):
        ax = fig.add_subplot(grid[0, 1 + i])
        for method, runs in trained.items():
            for k, s in enumerate(r for r in runs if r.horizon == h):
                rows = ledger(s)
                ax.plot(rows["step"], rows["turns"], marker="o", ms=3, color=COLORS[method],
                        label=METHOD_LABELS[method].lstrip("+ ") if k == 0 else None)
        budget = max((s.env_kwargs.get("max_turns") or 3 * h) for s in specs if s.horizon == h)
        ax.axhline(h, color="black", ls=":", lw=1, label="minimum (H*)")
        ax.axhline(budget, color="black", ls="--", lw=1, label="turn budget")
        ax.set_ylim(0, budget + 1)
        ax.set_title(f"H*={h}")
        ax.set_xlabel("update (ES generation / RL step)")
        ax.set_ylabel("turns per training episode")
        ax.legend(fontsize=7)
    return save_figure(fig, out_dir, "fig7")


def _column(rows: dict, key: str) -> np.ndarray:
    """A ledger column as floats; NaN where the ledger predates it."""
    n = len(rows["step"])
    return np.asarray(rows.get(key, [None] * n), dtype=float)


def train_reward_figure(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """The ES runs' training reward per generation, one panel per experiment and H*: the
    mean over the generation's directions, a band of +-1 std over them and their min and
    max as thin lines (from the ledgers). Writes train_reward.pdf and train_reward.png."""
    order = list(dict.fromkeys(s.experiment for s in specs))  # as configured: Sudoku first
    panels = sorted({(s.experiment, s.horizon) for s in specs},
                    key=lambda p: (order.index(p[0]), p[1])) or [(None, None)]
    es = {m: runs for m, runs in _by_method(specs).items() if m in ES_METHODS + ASYNC_METHODS}
    fig, axes = plt.subplots(1, len(panels), figsize=(0.8 + 3.6 * len(panels), 3.2),
                             constrained_layout=True, squeeze=False)
    for ax, (experiment, h) in zip(axes[0], panels, strict=True):
        drawn = False
        for method, runs in es.items():
            color = COLORS[method]
            for k, s in enumerate(r for r in runs if (r.experiment, r.horizon) == (experiment, h)):
                rows = ledger(s)
                steps, mean = np.asarray(rows["step"]), _column(rows, "reward_mean")
                std = _column(rows, "reward_std")
                ax.plot(steps, mean, marker="o", ms=3, color=color,
                        label=METHOD_LABELS[method].lstrip("+ ") if k == 0 else None)
                ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.2, lw=0)
                for key in ("reward_min", "reward_max"):
                    ax.plot(steps, _column(rows, key), color=color, lw=0.6)
                drawn = True
        if not drawn:
            ax.text(0.5, 0.5, "no ES run", transform=ax.transAxes, ha="center")
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles + [Patch(color="grey", alpha=0.3), Line2D([], [], color="grey",
                                                                     lw=0.6)],
                  labels + ["±1 std over directions", "min / max over directions"], fontsize=6)
        ax.set_title("" if h is None else "Countdown" if experiment == "countdown"
                     else f"{experiment.capitalize()}, H*={h}")
        ax.set_xlabel("update (ES generation)")
        ax.set_ylabel("training reward (directions)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return save_figure(fig, out_dir, "train_reward")
