"""Table 6: how far ES moved the parameters, as the fraction of parameters whose total
update |theta_final - theta_base| stays under thresholds tied to the perturbation scale.

The paper's Table 6 (WebArena, sigma = 1.5e-3 constant) uses 1.0e-3, 1.5e-3 (= sigma) and
2.0e-3, that is 2/3, 1 and 4/3 sigma; the rule here is the same for every ES run, with
sigma_0 of the run's schedule. The checkpoints are read one tensor at a time (a 27B model's
float32 master is ~108 GB), and each difference is taken in float64, where the difference
of two float32 values is exact, so that a threshold comparison never depends on rounding.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch

from esopt.pipeline.spec import RunSpec
from esopt.report.tables import METHOD_LABELS, Table
from esopt.runtime.atomic import write_json_atomic
from esopt.runtime.checkpoint import WEIGHTS_NAME, verify_checkpoint

SIGMA_MULTIPLES = (2 / 3, 1.0, 4 / 3)
"""Thresholds in units of sigma_0: the paper's 1.0, 1.5 and 2.0 x 1e-3 at sigma 1.5e-3."""
CHUNK = 1 << 24
"""Elements per float64 slice of a tensor (128 MiB)."""
PAPER_TABLE6 = (83.68, 96.26, 99.42)
"""The paper's fractions (%) at those thresholds: Qwen3.5-27B after ESOpt on WebArena."""


def update_magnitudes(pairs: Iterable[tuple[torch.Tensor, torch.Tensor]],
                      thresholds: Sequence[float]) -> dict:
    """Counts of |final - base| <= t per threshold over (base, final) tensor pairs, with
    the total, the largest and the mean magnitude. Pure: the tensors are not changed."""
    thresholds = [float(t) for t in thresholds]
    if any(t <= 0 for t in thresholds):
        raise ValueError(f"thresholds must be > 0, got {thresholds}")
    counts = [0] * len(thresholds)
    total, largest, abs_sum = 0, 0.0, 0.0
    for base, final in pairs:
        assert base.shape == final.shape, (base.shape, final.shape)
        # In slices: a large model's embedding in float64 would be several GB at once.
        for b, f in zip(base.flatten().split(CHUNK), final.flatten().split(CHUNK),
                        strict=True):
            delta = (f.to(torch.float64) - b.to(torch.float64)).abs()
            for i, t in enumerate(thresholds):
                counts[i] += int((delta <= t).sum())
            total += delta.numel()
            largest = max(largest, float(delta.max()))
            abs_sum += float(delta.sum())
    if total == 0:
        raise ValueError("update_magnitudes: no parameters")
    return {"thresholds": thresholds, "counts": counts, "parameters": total,
            "fractions": [c / total for c in counts], "max_abs": largest,
            "mean_abs": abs_sum / total}


def checkpoint_pairs(base_dir: str | Path, final_dir: str | Path
                     ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(base, final) tensors of two checkpoints of the same model, one pair at a time;
    both weights files are checked against their manifests' sha256 first."""
    from safetensors import safe_open

    verify_checkpoint(base_dir)
    verify_checkpoint(final_dir)
    with safe_open(str(Path(base_dir) / WEIGHTS_NAME), "pt") as b, \
            safe_open(str(Path(final_dir) / WEIGHTS_NAME), "pt") as f:
        names_b, names_f = set(b.keys()), set(f.keys())
        if names_b != names_f:
            raise ValueError(f"{final_dir} and {base_dir} hold different tensors: "
                             f"{sorted(names_b ^ names_f)[:5]}")
        for name in sorted(names_b):
            yield b.get_tensor(name), f.get_tensor(name)


def magnitudes_stage(spec: RunSpec, base_dir: str | Path, final_dir: str | Path,
                     out: str | Path) -> dict:
    """A run's Table 6 record: the magnitudes at SIGMA_MULTIPLES x sigma_0, with the run's
    spec (the artifact carries its resolved config)."""
    sigma_0 = spec.es.sigma.sigma_0
    record = update_magnitudes(checkpoint_pairs(base_dir, final_dir),
                               [m * sigma_0 for m in SIGMA_MULTIPLES])
    record.update(sigma_0=sigma_0, generations=spec.generations,
                  multiples=list(SIGMA_MULTIPLES), base=str(base_dir), final=str(final_dir),
                  spec=json.loads(spec.to_json()))
    write_json_atomic(out, record)
    return record


def _multiple_text(m: float) -> str:
    return {2 / 3: "2/3", 1.0: "1", 4 / 3: "4/3"}.get(m, f"{m:g}")


def table6(records: Sequence[dict]) -> Table:
    """One row per ES run, then the paper's row for context."""
    header = (["Experiment", "H*", "Method", "Seed", "Generations", "sigma_0"]
              + [f"|Δθ| ≤ {_multiple_text(m)} sigma_0" for m in SIGMA_MULTIPLES]
              + ["max |Δθ|"])
    rows = []
    key = lambda r: (r["spec"]["experiment"], r["spec"]["horizon"], r["spec"]["method"],  # noqa: E731
                     r["spec"]["seed"])
    for r in sorted(records, key=key):
        s = r["spec"]
        rows.append([s["experiment"], str(s["horizon"]), METHOD_LABELS[s["method"]].lstrip("+ "),
                     str(s["seed"]), str(r["generations"]), f"{r['sigma_0']:.1e}"]
                    + [f"{100 * f:.2f}%" for f in r["fractions"]] + [f"{r['max_abs']:.2e}"])
    rows.append(["WebArena (paper, Qwen3.5-27B)", "–", "Agentic ESOpt", "–", "70", "1.5e-03"]
                + [f"{v:.2f}%" for v in PAPER_TABLE6] + ["–"])
    return header, rows
