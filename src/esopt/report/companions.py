"""The companion-methods comparison (issue 19): ES, CoPES, async ES, low-rank ES on the
same Sudoku runs: a table (held-out success, training reward, evaluations spent) and a
figure (training reward curves, held-out success along training)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from esopt.pipeline.spec import RunSpec  # noqa: E402
from esopt.report.figures import COLORS, save_figure  # noqa: E402
from esopt.report.results import eval_curve, ledger  # noqa: E402
from esopt.report.summary import method_results  # noqa: E402
from esopt.report.tables import METHOD_LABELS, Table, _by_method, success_stats  # noqa: E402

COMPARED = ("vanilla_es", "esopt", "copes", "async_es", "lowrank_es")

# The companion papers' headline results, quoted from their abstracts (paper/ text), for
# the report's notes; none is reproduced at this scale.
PAPER_NOTES = (
    "CoPES (Wang, Liu, Wu et al.): under the GPU-hour budget of full-parameter GRPO's best "
    "validation checkpoint, CoPES recovers 92% of GRPO's validation-accuracy gain vs 67% for "
    "standard ES (Qwen3.5-4B, math with a tool), at < 1/8 of GRPO's theoretical GPU memory.",
    "Bounded-staleness async ES (WebShop): natural asynchrony closely tracks synchronous ES; "
    "the drop in evaluation accuracy stays small even under extreme staleness, including "
    "when all fitness measurements are stale (the abstract gives no number).",
)


def settings(spec: RunSpec) -> str:
    """The method's own hyper-parameters, as the table shows them."""
    if spec.method == "copes":
        k = spec.es.subspaces
        step = ("sigma*sqrt(K), step sqrt(K) x ES's" if spec.es.subspace_normalisation
                == "paper" else "sigma and step matched to ES")
        return f"K={k}, N/K={spec.es.population_size // k}, {step}"
    if spec.method == "async_es":
        a = spec.asynchrony
        if a.arrivals == "natural":
            return f"L={a.max_lag}, natural asynchrony (duration spread {a.duration_spread:g})"
        return f"L={a.max_lag}, {a.delayed_fraction:.0%} delayed by {a.delay}"
    if spec.method == "lowrank_es":
        return (f"r={spec.es.rank}, {'antithetic' if spec.es.antithetic else 'one-sided'}, "
                f"vectors {'full-rank noise' if spec.es.full_rank_vectors else 'unperturbed'}")
    return "full rank, synchronous"


def stale_used(ledgers: list[dict]) -> str:
    """An async run's stale fitness measurements (lag >= 1) among the results its updates
    used, with the largest lag, summed over its seeds (its ledger's async columns); a dash
    for a synchronous method."""
    if not ledgers or any("stale_accepted" not in r for r in ledgers):
        return "–"
    stale = sum(sum(r["stale_accepted"]) for r in ledgers)
    used = sum(sum(r["accepted"]) for r in ledgers)
    lag = max(max(r["max_lag_used"], default=0) for r in ledgers)
    return f"{stale} of {used} (lags <= {lag})"


def companion_table(specs: list[RunSpec]) -> Table:
    """One row per (method, H*): success x100 at generation 0 and at the end, the final
    success minus the base model's on the same tasks (paired 95% bootstrap CI, x100),
    training reward of the first and last generation, the episodes training played, and
    how many stale results an async run used."""
    header = ["Method", "H*", "Settings", "G", "Generations", "Episodes",
              "Stale results used", "Train reward (first -> last)",
              "Held-out success (gen 0 -> final)", "Final - base (paired 95% CI)"]
    vs_base = {(r.experiment, r.horizon, r.method): r.vs_base for r in method_results(specs)}
    rows = []
    for method, runs in _by_method([s for s in specs if s.method in COMPARED]).items():
        for h in sorted({s.horizon for s in runs}):
            at_h = [s for s in runs if s.horizon == h]
            led = [ledger(s) for s in at_h]
            first = np.mean([r["reward_mean"][0] for r in led])
            last = np.mean([r["reward_mean"][-1] for r in led])
            episodes = np.mean([sum(r["episodes"]) for r in led])
            gen0 = 100 * np.mean([eval_curve(s, specs)[0][1] for s in at_h])
            mean, std, _ = success_stats(at_h)
            rows.append([METHOD_LABELS[method].lstrip("+ "), str(h), settings(at_h[0]),
                         str(at_h[0].es.population_size), str(at_h[0].es.generations),
                         f"{episodes:.0f}",
                         stale_used(led) if method == "async_es" else "–",
                         f"{first:.3f} -> {last:.3f}",
                         f"{gen0:.1f} -> {mean:.1f} ± {std:.1f}",
                         _points(vs_base.get((at_h[0].experiment, h, method)))])
    return header, rows


def _points(d) -> str:
    """A paired difference in points (x100) with its CI, or a dash without a base run."""
    if d is None:
        return "–"
    return f"{100 * d.mean:+.1f} [{100 * d.lo:+.1f}, {100 * d.hi:+.1f}]"


def write_companions(specs: list[RunSpec], tables_dir: str | Path, figures_dir: str | Path
                     ) -> None:
    """results/tables/companions.{csv,md,tex} (the md with the papers' notes) and
    results/figures/companions.{pdf,png}."""
    from esopt.report.tables import write_table

    write_table(companion_table(specs), tables_dir, "companions")
    md = Path(tables_dir) / "companions.md"
    md.write_text(md.read_text() + "\n" + "\n".join(f"- {n}" for n in PAPER_NOTES) + "\n")
    companion_figure(specs, figures_dir)


def companion_figure(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Training reward per update (a) and held-out success per kept checkpoint (b)."""
    by_method = _by_method([s for s in specs if s.method in COMPARED])
    fig, (ax_r, ax_s) = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
    for method, runs in by_method.items():
        label, color = METHOD_LABELS[method].lstrip("+ "), COLORS[method]
        for k, s in enumerate(runs):
            rows = ledger(s)
            ax_r.plot(rows["step"], rows["reward_mean"], marker="o", ms=3, color=color,
                      label=label if k == 0 else None)
            curve = eval_curve(s, specs)
            ax_s.errorbar([c[0] for c in curve], [100 * c[1] for c in curve],
                          yerr=[100 * c[2] for c in curve], marker="o", ms=3, capsize=2,
                          color=color, label=label if k == 0 else None)
    for ax in (ax_r, ax_s):  # updates and generations are whole numbers
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_r.set_xlabel("update")
    ax_r.set_ylabel("mean training reward")
    ax_r.set_title("(a) training reward")
    ax_s.set_xlabel("generation")
    ax_s.set_ylabel("held-out success (x100)")
    ax_s.set_title("(b) held-out success")
    ax_s.legend(fontsize=7)
    return save_figure(fig, out_dir, "companions")
