"""Table 3 (math rows: Mean@k, Pass@k per condition) and Figure 8 (best-of-k curves).

Conditions per math experiment, H* and seed: No Skill (base model), Agentic ESOpt + No
Skill (final ES checkpoint), Trace2Skill (base model + SKILL.md from its own failed
training rollouts) and Agentic ESOpt + Trace2Skill (final checkpoint + SKILL.md distilled
post hoc from the ES run's trajectories). k is the number of evaluation repeats.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from esopt.agent.metrics import best_of_k_curve, mean_at_k, pass_at_k  # noqa: E402
from esopt.pipeline.spec import RunSpec  # noqa: E402
from esopt.report.figures import save_figure  # noqa: E402
from esopt.report.tables import Table  # noqa: E402

CONDITIONS = (("No Skill", "base", "final"), ("Agentic ESOpt + No Skill", "esopt", "final"),
              ("Trace2Skill", "base", "skill"), ("Agentic ESOpt + Trace2Skill", "esopt", "skill"))


def correct_matrix(path: str | Path) -> np.ndarray:
    """(tasks, repeats) booleans from an evaluation Parquet."""
    t = pq.read_table(path, columns=["task_seed", "repeat", "success"]).to_pydict()
    tasks = sorted(set(t["task_seed"]))
    repeats = sorted(set(t["repeat"]))
    index = {s: i for i, s in enumerate(tasks)}
    out = np.zeros((len(tasks), len(repeats)), dtype=bool)
    for s, r, ok in zip(t["task_seed"], t["repeat"], t["success"], strict=True):
        out[index[s], repeats.index(r)] = ok
    return out


def _eval_path(spec: RunSpec, kind: str) -> Path:
    return Path(spec.run_dir) / ("final/eval.parquet" if kind == "final" else "skill/eval.parquet")


def math_specs(specs: list[RunSpec], skill_experiments: list[str]) -> list[RunSpec]:
    return [s for s in specs if s.experiment in skill_experiments]


def table3(specs: list[RunSpec]) -> Table:
    k = max((s.eval_repeats for s in specs), default=1)
    header = ["Experiment", "Turns", "Condition", f"Mean@{k} (%)", f"Pass@{k} (%)", "Problems"]
    rows = []
    eval_models = list(dict.fromkeys(s.eval_model for s in specs if s.eval_model))
    # Evaluation-only models (config eval_models) first, as No Skill rows of their own.
    conditions = [(f"{m} (evaluation only) + No Skill", ("base", m), "final")
                  for m in eval_models]
    conditions += [(label, (method, ""), kind) for label, method, kind in CONDITIONS]
    for exp in dict.fromkeys(s.experiment for s in specs):
        for h in sorted({s.horizon for s in specs if s.experiment == exp}):
            for label, (method, model), kind in conditions:
                runs = [s for s in specs if (s.experiment, s.horizon, s.method,
                                             s.eval_model) == (exp, h, method, model)]
                mats = [correct_matrix(_eval_path(s, kind)) for s in runs
                        if _eval_path(s, kind).exists()]
                if not mats:
                    continue
                means = [100 * mean_at_k(m) for m in mats]
                passes = [100 * pass_at_k(m) for m in mats]
                rows.append([exp, str(h), label, f"{np.mean(means):.2f}±{np.std(means):.2f}",
                             f"{np.mean(passes):.2f}±{np.std(passes):.2f}",
                             str(mats[0].shape[0])])
    return header, rows


def figure8(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Best-of-k success (unbiased estimator) per condition, k up to the repeats."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, method, kind in CONDITIONS:
        mats = [correct_matrix(_eval_path(s, kind)) for s in specs
                if s.method == method and not s.eval_model and _eval_path(s, kind).exists()]
        if not mats:
            continue
        curves = [best_of_k_curve(m) for m in mats]
        ks = sorted(curves[0])
        ax.plot(ks, [100 * np.mean([c[k] for c in curves]) for k in ks], marker="o",
                label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel("best-of-k success (%)")
    ax.set_title("Math with a tool: best-of-k")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(fig, out_dir, "fig8", bbox_inches="tight")
