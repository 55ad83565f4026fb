"""Figure 3: final Sudoku success by H* (a) and evaluation curves along training (b);
Figure 7 (right): turns per training episode along training, RL vs ES."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from esopt.pipeline.spec import RL_METHODS, RunSpec  # noqa: E402
from esopt.report.results import eval_curve, ledger  # noqa: E402
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


def figure7(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Turns used per training episode at each update (ES: over all directions of the
    generation; RL: over the step's rollouts), one panel per H*, with the minimum H* and
    the 3H* turn budget marked. Writes fig7.pdf and fig7.png."""
    horizons = sorted({s.horizon for s in specs})
    trained = {m: runs for m, runs in _by_method(specs).items() if m != "base"}
    fig, axes = plt.subplots(1, len(horizons), figsize=(0.5 + 3.4 * len(horizons), 3.2),
                             constrained_layout=True, squeeze=False)
    for ax, h in zip(axes[0], horizons, strict=True):
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
