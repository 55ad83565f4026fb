"""Figure 6: Gaussian-smoothed reward landscapes around a checkpoint, one panel per H*."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from esopt.pipeline.spec import RunSpec  # noqa: E402
from esopt.report.figures import save_figure  # noqa: E402
from esopt.report.tables import METHOD_LABELS  # noqa: E402

# Width of the smoothing kernel in grid cells: the value of a cell is a weighted average
# over its neighbours within ~2 cells (the paper's "local neighborhood").
SMOOTH_CELLS = 0.75


@dataclass(frozen=True)
class Landscape:
    """A landscape Parquet as a grid: reward_xy[i, j] at (axis[i], axis[j])."""

    spec: RunSpec
    settings: dict
    axis: np.ndarray
    reward_xy: np.ndarray

    @property
    def best(self) -> tuple[float, float]:
        return self._extreme(np.nanargmax)

    @property
    def worst(self) -> tuple[float, float]:
        return self._extreme(np.nanargmin)

    def _extreme(self, arg) -> tuple[float, float]:
        """(x, y) of the raw grid point `arg` picks; among ties the one nearest the centre."""
        r = self.reward_xy
        value = r.flat[arg(r)]
        xs, ys = np.meshgrid(self.axis, self.axis, indexing="ij")
        ties = np.flatnonzero(r == value)
        k = ties[np.argmin(xs.flat[ties] ** 2 + ys.flat[ties] ** 2)]
        return float(xs.flat[k]), float(ys.flat[k])


def read_landscape(path: str | Path) -> Landscape:
    """The grid of a landscape Parquet (esopt.pipeline.landscape), with its run's spec."""
    meta = pq.read_schema(path).metadata
    t = pq.read_table(path, columns=["x", "y", "reward"]).to_pydict()
    axis = np.unique(t["x"])
    index = {float(v): i for i, v in enumerate(axis)}
    reward = np.full((len(axis), len(axis)), np.nan)
    for x, y, r in zip(t["x"], t["y"], t["reward"], strict=True):
        reward[index[float(x)], index[float(y)]] = np.nan if r is None else r
    return Landscape(RunSpec.from_json(meta[b"config"].decode()),
                     json.loads(meta[b"landscape"]), axis, reward)


def gaussian_smooth(values: np.ndarray, cells: float = SMOOTH_CELLS) -> np.ndarray:
    """NaN-aware Gaussian smoothing of a 2-D grid (std `cells` grid cells): each value is
    the kernel-weighted mean of the finite values, the kernel cut at the grid's edges and
    renormalised there (no darkening at the border); NaN where no finite value is near."""
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    # Separable: W_rows @ V @ W_cols^T with W[i, k] = exp(-(i - k)^2 / (2 cells^2)).
    w = [np.exp(-np.subtract.outer(np.arange(n), np.arange(n)) ** 2 / (2 * cells ** 2))
         for n in v.shape]
    num = w[0] @ np.where(ok, v, 0.0) @ w[1].T
    den = w[0] @ ok.astype(np.float64) @ w[1].T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, num / den, np.nan)


def figure6(paths: list[str | Path], out_dir: str | Path, cells: float = SMOOTH_CELLS
            ) -> list[Path]:
    """Per landscape (one per H*) a heat map of the smoothed reward over (x, y) in units
    of sigma_0, the centre (the base model or the final checkpoint) and the best and worst
    raw grid points marked, one colour scale for all panels. Writes fig6.pdf and
    fig6.png."""
    lands = sorted((read_landscape(p) for p in paths),
                   key=lambda la: (la.spec.experiment, la.spec.horizon))
    smoothed = [gaussian_smooth(la.reward_xy, cells) for la in lands]
    finite = np.concatenate([s[np.isfinite(s)] for s in smoothed] + [np.zeros(0)])
    lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    if hi - lo < 1e-9:  # a flat landscape: centre the one colour in the scale
        lo, hi = lo - 0.5, hi + 0.5
    fig, axes = plt.subplots(1, max(1, len(lands)), figsize=(1.2 + 3.6 * max(1, len(lands)), 3.6),
                             constrained_layout=True, squeeze=False)
    image = None
    for ax, la, smooth in zip(axes[0], lands, smoothed, strict=False):
        half = (la.axis[1] - la.axis[0]) / 2 if len(la.axis) > 1 else 0.5
        extent = (la.axis[0] - half, la.axis[-1] + half) * 2
        # imshow rows are y: the transposed grid, y growing upwards.
        image = ax.imshow(smooth.T, origin="lower", extent=extent, cmap="viridis", vmin=lo,
                          vmax=hi, interpolation="nearest", aspect="equal")
        # Files written before the option were centred on the final checkpoint.
        base = la.settings.get("centre", "final") == "base"
        ax.plot(0, 0, "P", color="white", mec="black", ms=9,
                label="base model" if base else "final checkpoint")
        if np.isfinite(la.reward_xy).any():
            ax.plot(*la.best, "^", color="#d62728", mec="white", ms=8, label="best (raw)")
            ax.plot(*la.worst, "v", color="#1f77b4", mec="white", ms=8, label="worst (raw)")
        s = la.spec
        where = f" ({s.experiment})" if len({la.spec.experiment for la in lands}) > 1 else ""
        around = "around the base model" if base else f"around gen {s.generations}"
        ax.set_title(f"H*={s.horizon}{where}: {METHOD_LABELS[s.method].lstrip('+ ')} "
                     f"{around}", fontsize=9)
        ax.set_xlabel(f"x (sigma_0 = {la.settings['sigma']:.2g}) along eps_a")
        ax.set_ylabel("y (sigma_0) along eps_b")
        ax.legend(fontsize=6, loc="upper right", framealpha=0.7)
    if not lands:
        axes[0][0].text(0.5, 0.5, "no landscape", transform=axes[0][0].transAxes,
                        ha="center")
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), shrink=0.85,
                     label="smoothed mean training reward")
    return save_figure(fig, out_dir, "fig6")
