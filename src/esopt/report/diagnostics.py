"""The ES diagnostics of every trained ES run (issue 36), per generation from its ledger:
directions tied on fitness (zero-signal generations), the update's norm as meant (float32)
and as realised where the weights are served, their cosine, the weights the served
precision left unchanged, the reward split into the environment's parts, the diversity of
the directions' outputs; and per run Table 6's |final - base| fractions.

`write_diagnostics(specs, tables_dir, figures_dir)` writes the table
(diagnostics.{csv,md,tex}) and the figure (diagnostics.{pdf,png}); it reads each run's
ledger.parquet and, where it exists, final/update_magnitudes.json.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from esopt.pipeline.spec import ASYNC_METHODS, ES_METHODS, RunSpec  # noqa: E402
from esopt.report.figures import COLORS, save_figure  # noqa: E402
from esopt.report.results import ledger, ledger_path  # noqa: E402
from esopt.report.tables import METHOD_LABELS, Table, write_table  # noqa: E402

STYLES = ("-", "--", ":", "-.")


def diagnosed_runs(specs: list[RunSpec]) -> list[RunSpec]:
    """The trained ES runs (every ES method, async included) that have a ledger."""
    return [s for s in specs if s.method in ES_METHODS + ASYNC_METHODS and s.generations
            and not s.eval_model and ledger_path(s).exists()]


def run_label(spec: RunSpec, specs: list[RunSpec]) -> str:
    """A run's name in the figure: its method, plus what tells it apart from the others."""
    label = METHOD_LABELS[spec.method].lstrip("+ ")
    if len({s.experiment for s in specs}) > 1:
        label = f"{spec.experiment} {label}"
    if len({s.horizon for s in specs}) > 1:
        label += f" H*={spec.horizon}"
    if len({s.seed for s in specs}) > 1:
        label += f" seed {spec.seed}"
    return label


def _column(rows: dict, name: str) -> np.ndarray:
    """A ledger column as floats (NaN where missing or null: older ledgers, RL rows)."""
    values = rows.get(name) or [None] * len(rows["step"])
    return np.array([math.nan if v is None else float(v) for v in values])


def _components(rows: dict) -> dict[str, np.ndarray]:
    """Each reward part's mean per generation (NaN where a generation has no parts)."""
    parsed = [json.loads(c) if c else {} for c in rows.get("reward_components")
              or [None] * len(rows["step"])]
    names = sorted({n for p in parsed for n in p})
    return {n: np.array([p.get(n, math.nan) if p else math.nan for p in parsed])
            for n in names}


def magnitudes(spec: RunSpec) -> dict | None:
    """The run's Table 6 record (final/update_magnitudes.json), if it was made."""
    path = Path(spec.run_dir) / "final" / "update_magnitudes.json"
    return json.loads(path.read_text()) if path.exists() else None


def _mean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else math.nan


def _fmt(value: float, spec: str = ".3f") -> str:
    return "–" if value is None or not math.isfinite(value) else format(value, spec)


def diagnostics_table(specs: list[RunSpec]) -> Table:
    """One row per trained ES run: zero-signal generations, the mean largest tied group, the
    realised update (norm over the intended one, cosine, weights unchanged) averaged over
    the generations that moved, the reward parts of the last generation, the output
    diversity, and Table 6's fraction |final - base| <= sigma_0."""
    header = ["Run", "Serving", "Generations", "Zero-signal generations", "Largest tied group / G",
              "Realised / intended norm", "Cosine (realised, intended)", "Weights unchanged",
              "Reward parts (last generation)", "Distinct completions",
              "|Δθ| ≤ sigma_0 (Table 6)"]
    runs = diagnosed_runs(specs)
    rows = []
    for s in runs:
        r = ledger(s)
        moved = np.array([not z for z in (r.get("zero_signal") or [False] * len(r["step"]))],
                         dtype=bool)
        zero = int((~moved).sum()) if r.get("zero_signal") else None
        intended, realised = _column(r, "intended_norm"), _column(r, "realised_norm")
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(intended > 0, realised / intended, math.nan)
        parts = _components(r)
        last = ", ".join(f"{n} {v[-1]:.3f}" for n, v in parts.items()
                         if math.isfinite(v[-1])) or "–"
        record = magnitudes(s)
        table6 = (f"{100 * record['fractions'][record['multiples'].index(1.0)]:.2f}%"
                  if record and 1.0 in record.get("multiples", []) else "–")
        rows.append([run_label(s, runs), s.serving_dtype, str(len(r["step"])),
                     "–" if zero is None else f"{zero} of {len(r['step'])}",
                     _fmt(_mean(_column(r, "tied_fraction")), ".2f"),
                     _fmt(_mean(ratio[moved])), _fmt(_mean(_column(r, "realised_cosine")[moved])),
                     _fmt(_mean(_column(r, "unchanged_fraction")[moved]), ".4f"), last,
                     _fmt(_mean(_column(r, "distinct_completions")), ".2f"), table6])
    return header, rows


def diagnostics_figure(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Per generation, one line per trained ES run: (a) tied directions (zero-signal
    generations marked x), (b) update norm, intended (solid) and realised (dashed), (c) the
    realised update's cosine with the intended, (d) weights unchanged, (e) reward parts,
    (f) output diversity; (g) Table 6's fractions per run. Writes diagnostics.{pdf,png}."""
    runs = diagnosed_runs(specs)
    fig, axes = plt.subplots(2, 4, figsize=(15, 6.6), constrained_layout=True)
    ax = dict(zip("abcdefgh", axes.flat, strict=True))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, s in enumerate(runs):
        r, label = ledger(s), run_label(s, runs)
        color = COLORS.get(s.method) if len({x.method for x in runs}) == len(runs) \
            else cycle[k % len(cycle)]
        step = np.array(r["step"])
        tied = _column(r, "tied_fraction")
        ax["a"].plot(step, tied, marker="o", ms=3, color=color, label=label)
        zero = np.array([bool(z) for z in (r.get("zero_signal") or [False] * len(step))])
        if zero.any():
            ax["a"].plot(step[zero], tied[zero], "x", ms=8, color=color)
        # A zero update has no norm to draw on the log scale: a gap (panel a marks it).
        for name, style in (("intended_norm", "-"), ("realised_norm", "--")):
            norm = _column(r, name)
            ax["b"].plot(step, np.where(norm > 0, norm, math.nan), style, marker=".",
                         color=color)
        ax["c"].plot(step, _column(r, "realised_cosine"), marker="o", ms=3, color=color)
        ax["d"].plot(step, _column(r, "unchanged_fraction"), marker="o", ms=3, color=color)
        for j, (name, values) in enumerate(_components(r).items()):
            ax["e"].plot(step, values, STYLES[j % len(STYLES)], marker=".", color=color,
                         label=f"{label}: {name}")
        ax["f"].plot(step, _column(r, "distinct_completions"), marker="o", ms=3, color=color)
    _table6_panel(ax["g"], runs)
    titles = {"a": "(a) largest group tied on fitness / G (x: no signal)",
              "b": "(b) update norm: float32 (solid), served (dashed)",
              "c": "(c) cosine(realised, intended)",
              "d": "(d) weights left unchanged where served",
              "e": "(e) mean reward by component", "f": "(f) distinct completions / G"}
    last = max((max(ledger(s)["step"], default=1) for s in runs), default=1)
    for key, title in titles.items():
        ax[key].set_title(title, fontsize=9)
        ax[key].set_xlabel("generation (update)")
        ax[key].set_xlim(0.5, last + 0.5)
        ax[key].xaxis.set_major_locator(MaxNLocator(integer=True))
    for key in "acdf":
        ax[key].set_ylim(-0.05 if key != "c" else -1.05, 1.05)
    if any(np.nanmax(_column(ledger(s), "intended_norm"), initial=0) > 0 for s in runs):
        ax["b"].set_yscale("log")
    for key in "ae":
        if ax[key].has_data():
            ax[key].legend(fontsize=6)
    ax["h"].axis("off")
    ax["h"].text(0, 1, _caption(runs), va="top", fontsize=7, wrap=True)
    return save_figure(fig, out_dir, "diagnostics")


def _table6_panel(ax, runs: list[RunSpec]) -> None:
    """Table 6's fractions |final - base| <= m sigma_0 per run, bars per threshold."""
    records = [(run_label(s, runs), magnitudes(s)) for s in runs]
    records = [(label, rec) for label, rec in records if rec]
    ax.set_title("(g) Table 6: |final - base| <= m sigma_0", fontsize=9)
    if not records:
        ax.text(0.5, 0.5, "no update_magnitudes.json", ha="center", transform=ax.transAxes)
        return
    multiples = records[0][1]["multiples"]
    width = 0.8 / len(records)
    for k, (label, rec) in enumerate(records):
        ax.bar(np.arange(len(multiples)) + k * width, [100 * f for f in rec["fractions"]],
               width, label=label)
    ax.set_xticks(np.arange(len(multiples)) + 0.4 - width / 2,
                  [f"{Fraction(m).limit_denominator(12)} sigma_0" for m in multiples])
    ax.set_ylabel("% of parameters")
    ax.legend(fontsize=6)


def _caption(runs: list[RunSpec]) -> str:
    dtypes = sorted({s.serving_dtype for s in runs}) or ["-"]
    return ("Per generation of every trained ES run (ledger.parquet).\n"
            "(b)-(d): the realised update is what changed in the weights\n"
            f"as served ({', '.join(dtypes)}); in float32 it is the\n"
            "float32 update itself (cosine 1, nothing unchanged).\n"
            "(e): the environment's reward parts (info reward_components).\n"
            "(f): distinct trajectories per task over the G directions:\n"
            "1/G = every direction wrote the same text.")


def write_diagnostics(specs: list[RunSpec], tables_dir: str | Path,
                      figures_dir: str | Path) -> None:
    """results/tables/diagnostics.{csv,md,tex} and results/figures/diagnostics.{pdf,png}."""
    write_table(diagnostics_table(specs), tables_dir, "diagnostics")
    diagnostics_figure(specs, figures_dir)


def part_inputs(specs: list[RunSpec]) -> list[str]:
    """What the report part reads of the trained ES runs `specs`: ledgers and Table 6's
    records (esopt.report.registry: the part's inputs)."""
    return ([f"{s.run_dir}/ledger.parquet" for s in specs]
            + [f"{s.run_dir}/final/update_magnitudes.json" for s in specs])


def build_part(job) -> None:
    """The report registry's build function of the diagnostics part (job: a PartJob)."""
    write_diagnostics(job.runs, job.tables, job.figures)
