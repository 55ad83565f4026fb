"""Table 3 (math and DocVQA columns per condition), Figure 8 (best-of-k) and Figure 9
(realized trajectory length during DocVQA training).

Conditions per experiment, H* and seed: No Skill (base model), Agentic GRPO + No Skill
(the GRPO run's final checkpoint), Agentic ESOpt + No Skill (final ES checkpoint),
Trace2Skill (base model + SKILL.md from its own failed training rollouts) and Agentic
ESOpt + Trace2Skill (final checkpoint + SKILL.md distilled post hoc from the ES run's
trajectories); evaluation-only models (config eval_models) first. Math is scored by
success (Mean@k, Pass@k), DocVQA by ANLS (Mean@k, Max@k) and exact-match accuracy (Mean@k,
Pass@k), k = 4 as the paper (fewer when fewer samples were drawn). With n > k samples per
problem the @k values are the unbiased estimates from all n (Mean@k: the mean of all n;
Pass@k and Max@k: the expected best of k drawn without replacement); with n = k, the plain
definitions. A held-out set of several sources (math: DAPO and AIME 2026, the paper's
columns) gets a column group per source. Each cell is the mean ± std over training seeds
and the 95% two-level bootstrap CI (seeds as clusters, the tasks they share;
esopt.report.stats.cluster_bootstrap) of the per-task @k values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from esopt.agent.metrics import expected_max_at_k, max_at_k  # noqa: E402
from esopt.pipeline.records import EvalRecord  # noqa: E402
from esopt.pipeline.spec import RunSpec  # noqa: E402
from esopt.report.figures import save_figure  # noqa: E402
from esopt.report.results import ledger, ledger_path  # noqa: E402
from esopt.report.stats import cluster_bootstrap  # noqa: E402
from esopt.report.tables import Table  # noqa: E402

CONDITIONS = (("No Skill", "base", "final"), ("Agentic GRPO + No Skill", "grpo", "final"),
              ("Agentic ESOpt + No Skill", "esopt", "final"),
              ("Trace2Skill", "base", "skill"), ("Agentic ESOpt + Trace2Skill", "esopt", "skill"))
TABLE3_K = 4  # the paper's Mean@4 / Pass@4 / Max@4
FIGURE8_KS = (1, 2, 8, 16, 32)  # the paper's curve (k = 4 is the star: the table's value)
# Experiments of Table 3: the math experiment with Trace2Skill, and DocVQA.
TABLE3_ENVS = ("math_tool", "docvqa")
TRAINED = {"esopt": "Agentic ESOpt", "grpo": "Agentic GRPO"}


@dataclass(frozen=True)
class Metric:
    """A Table 3 score of an experiment: an evaluation column, as (tasks, samples)."""

    column: str
    name: str  # column-header prefix ("" for math's success)
    label: str  # in figures
    best: str  # Pass (0/1 scores) or Max (ANLS)
    scale: float  # 100: shown in %
    digits: int


METRICS = {
    "math_tool": (Metric("success", "", "success", "Pass", 100.0, 2),),
    "docvqa": (Metric("anls", "ANLS ", "ANLS", "Max", 1.0, 4),
               Metric("accuracy", "Acc. ", "accuracy", "Pass", 100.0, 2)),
}


# Short names of the held-out sets' sources in column headers (a record's `source`).
SOURCE_LABELS = {"BytedTsinghua-SIA/DAPO-Math-17k": "DAPO", "MathArena/aime_2026": "AIME 2026"}


def task_sources(path: str | Path) -> dict[int, str]:
    """{task seed: its problem's source} of an evaluation Parquet (every repeat of a task
    has the same; a failed episode may lack it); empty without a `source` column."""
    if "source" not in pq.read_schema(path).names:
        return {}
    t = EvalRecord.read_columns(path, ["task_seed", "source"])
    out: dict[int, str] = {}
    for seed, source in zip(t["task_seed"], t["source"], strict=True):
        if source and seed not in out:
            out[seed] = source
    return out


def score_matrix(path: str | Path, column: str = "success", source: str | None = None
                 ) -> np.ndarray:
    """(tasks, repeats) scores of one column of an evaluation Parquet, float64, of the
    tasks from `source` (None: all); a failed episode's missing score counts 0, as its
    success does."""
    t = EvalRecord.read_columns(path, ["task_seed", "repeat", column])
    keep = None if source is None else {k for k, v in task_sources(path).items() if v == source}
    tasks = sorted(x for x in set(t["task_seed"]) if keep is None or x in keep)
    repeats = sorted(set(t["repeat"]))
    index = {s: i for i, s in enumerate(tasks)}
    out = np.zeros((len(tasks), len(repeats)), dtype=np.float64)
    for s, r, v in zip(t["task_seed"], t["repeat"], t[column], strict=True):
        if s in index:
            out[index[s], repeats.index(r)] = float(v or 0.0)
    return out


def correct_matrix(path: str | Path) -> np.ndarray:
    """(tasks, repeats) booleans of success from an evaluation Parquet."""
    return score_matrix(path, "success").astype(bool)


def _eval_path(spec: RunSpec, kind: str) -> Path:
    return Path(spec.run_dir) / ("final/eval.parquet" if kind == "final" else "skill/eval.parquet")


def math_specs(specs: list[RunSpec], experiments: list[str]) -> list[RunSpec]:
    """The runs of Table 3's experiments (math with skills, DocVQA)."""
    return [s for s in specs if s.experiment in experiments]


def at_k(scores: np.ndarray, k: int) -> tuple[float, float]:
    """(Mean@k, best@k) of a (tasks, n) score matrix, n >= k: the mean of all samples and
    the mean expected best of k (Pass@k for 0/1 scores, Max@k for ANLS)."""
    return float(scores.mean()), max_at_k(scores, k)


def _conditions(specs: list[RunSpec]) -> list[tuple[str, str, str, str]]:
    """(label, method, eval_model, kind): evaluation-only models first, as No Skill."""
    models = list(dict.fromkeys(s.eval_model for s in specs if s.eval_model))
    return ([(f"{m} (evaluation only) + No Skill", "base", m, "final") for m in models]
            + [(label, method, "", kind) for label, method, kind in CONDITIONS])


def _sources(specs: list[RunSpec], exp: str, h: int) -> list[str | None]:
    """The held-out sources of (experiment, H*) in the order their tasks come, read from
    its evaluation files; [None] (one group, unlabelled) when there are fewer than two."""
    seen: dict[str, None] = {}
    for s in specs:
        if (s.experiment, s.horizon) != (exp, h):
            continue
        for kind in ("final", "skill"):
            if _eval_path(s, kind).exists():
                by_task = task_sources(_eval_path(s, kind))
                seen.update(dict.fromkeys(by_task[t] for t in sorted(by_task)))
    return list(seen) if len(seen) > 1 else [None]


def _groups(specs: list[RunSpec]) -> list[tuple[str, int, str, str | None]]:
    """(experiment, H*, env, source) column groups, in config order (a group per held-out
    source when there are several)."""
    pairs = dict.fromkeys((s.experiment, s.horizon, s.env) for s in specs if s.env in METRICS)
    return [(exp, h, env, src) for exp, h, env in pairs for src in _sources(specs, exp, h)]


def _group_name(exp: str, h: int, source: str | None) -> str:
    return f"{exp} H{h}" + ("" if source is None else f" {SOURCE_LABELS.get(source, source)}")


def at_k_cells(mats: list[np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
    """(seeds, tasks) matrices of the per-task Mean@k and best@k (Pass@k, Max@k) values of
    one (tasks, n) score matrix per seed, k <= n."""
    if len({x.shape[0] for x in mats}) != 1:
        raise ValueError(f"seeds evaluated different numbers of tasks: "
                         f"{[x.shape[0] for x in mats]}")
    mean = np.stack([x.mean(axis=1) for x in mats])
    best = np.stack([[expected_max_at_k(row, min(k, x.shape[1])) for row in x] for x in mats])
    return mean, best


def _cell(cells: np.ndarray, m: Metric) -> str:
    """mean ± std over seeds [95% cluster-bootstrap CI], scaled as the metric shows."""
    per_seed = cells.mean(axis=1) * m.scale
    ci = cluster_bootstrap(cells)
    d = m.digits
    return (f"{per_seed.mean():.{d}f}±{per_seed.std():.{d}f} "
            f"[{m.scale * ci.lo:.{d}f}, {m.scale * ci.hi:.{d}f}]")


def table3(specs: list[RunSpec]) -> Table:
    """One row per condition; per (experiment, H*, held-out source) its metrics' Mean@k and
    Pass@k/Max@k: mean±std over seeds and the 95% cluster-bootstrap CI; the last row
    gives held-out tasks x samples per column group."""
    k = min(TABLE3_K, max((s.eval_repeats for s in specs), default=1))
    header, sizes = ["Condition"], {}
    groups = _groups(specs)
    for exp, h, env, src in groups:
        for m in METRICS[env]:
            pct = " (%)" if m.scale == 100 else ""
            name = _group_name(exp, h, src)
            header += [f"{name} {m.name}Mean@{k}{pct}", f"{name} {m.name}{m.best}@{k}{pct}"]
    rows = []
    for label, method, model, kind in _conditions(specs):
        row, found = [label], False
        for exp, h, env, src in groups:
            runs = sorted((s for s in specs if (s.experiment, s.horizon, s.method, s.eval_model)
                           == (exp, h, method, model) and _eval_path(s, kind).exists()),
                          key=lambda s: s.seed)
            for m in METRICS[env]:
                mats = [score_matrix(_eval_path(s, kind), m.column, src) for s in runs]
                if not mats:
                    row += ["", ""]
                    continue
                found = True
                row += [_cell(c, m) for c in at_k_cells(mats, k)]
                sizes.setdefault((exp, h, src), f"{mats[0].shape[0]}x{mats[0].shape[1]}")
        if found:
            rows.append(row)
    counts = ["Held-out tasks x samples"]
    for exp, h, env, src in groups:
        counts += [sizes.get((exp, h, src), "")] * (2 * len(METRICS[env]))
    return header, rows + ([counts] if rows else [])


def _panels(specs: list[RunSpec]) -> list[tuple[str, int, str | None, Metric]]:
    return [(exp, h, src, m) for exp, h, env, src in _groups(specs) for m in METRICS[env]]


def best_of_k_points(scores: np.ndarray) -> dict[int, float]:
    """Figure 8's curve of a (tasks, n) score matrix: the expected best of k samples for
    k in FIGURE8_KS up to n (k = 1: the mean)."""
    return {k: max_at_k(scores, k) for k in FIGURE8_KS if k <= scores.shape[1]}


def figure8(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Best-of-k per condition, one panel per experiment, H*, held-out source (when
    several) and metric: curves over
    k = 1, 2, 8, 16, 32 (as many as were sampled), a circle at k = 1 (Mean@4) and a star at
    k = 4 (Table 3's Pass@4 / Max@4)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    panels = _panels(specs) or [("", 0, None, METRICS["math_tool"][0])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 3.8), squeeze=False,
                             constrained_layout=True)
    for ax, (exp, h, src, m) in zip(axes[0], panels, strict=True):
        for i, (label, method, model, kind) in enumerate(_conditions(specs)):
            mats = [score_matrix(_eval_path(s, kind), m.column, src) for s in specs
                    if (s.experiment, s.horizon, s.method, s.eval_model) == (exp, h, method, model)
                    and _eval_path(s, kind).exists()]
            if not mats:
                continue
            color = f"C{i}"
            curves = [best_of_k_points(x) for x in mats]
            ks = sorted(set.intersection(*(set(c) for c in curves)))
            ys = [m.scale * np.mean([c[k] for c in curves]) for k in ks]
            ax.plot(ks, ys, color=color, label=label)
            ax.plot([1], ys[:1], "o", color=color)
            n = min(x.shape[1] for x in mats)
            if n >= TABLE3_K:
                star = m.scale * np.mean([max_at_k(x, TABLE3_K) for x in mats])
                ax.plot([TABLE3_K], [star], "*", ms=11, color=color)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))  # 1, 2, 4: not 2^k
        ax.set_ylim(bottom=0)  # scores are >= 0
        ax.set_xlabel("k (samples per task)")
        ax.set_ylabel(f"best-of-k {m.label}" + (" (%)" if m.scale == 100 else ""))
        ax.set_title(f"{_group_name(exp, h, src)}: {m.label}")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return save_figure(fig, out_dir, "fig8", bbox_inches="tight")


def trajectory_lengths(spec: RunSpec) -> tuple[list[int], list[float]]:
    """(update, average turns per training episode) from a trained run's ledger: ES
    generation t over all its directions' episodes, RL step k over its rollouts."""
    rows = ledger(spec)
    return [int(x) for x in rows["step"]], [float(x) for x in rows["turns"]]


def figure9(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Average realized trajectory length during DocVQA training, Agentic GRPO vs Agentic
    ESOpt on a common update axis (ES generation = RL step), shown through the ES run's
    last generation (all of GRPO's steps when no ES run trained), per H*; the turn limit
    dashed. Means over seeds."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    trained = [s for s in specs if s.env == "docvqa" and s.method in TRAINED and not
               s.eval_model and ledger_path(s).exists()]
    horizons = sorted({s.horizon for s in trained}) or [0]
    fig, axes = plt.subplots(1, len(horizons), figsize=(5 * len(horizons), 3.6), squeeze=False)
    for ax, h in zip(axes[0], horizons, strict=True):
        runs = [s for s in trained if s.horizon == h]
        es_last = max((s.generations for s in runs if s.method == "esopt"), default=None)
        for i, (method, label) in enumerate(TRAINED.items()):
            series = [trajectory_lengths(s) for s in runs if s.method == method]
            if not series:
                continue
            steps = sorted(set.intersection(*(set(x) for x, _ in series)))
            if es_last is not None:
                steps = [x for x in steps if x <= es_last]
            ys = [np.mean([dict(zip(x, y, strict=True))[t] for x, y in series]) for t in steps]
            ax.plot(steps, ys, marker="o", ms=3, color=f"C{i}", label=label)
        if runs:
            ax.axhline(h, color="black", ls="--", lw=1, label="turn limit")
            ax.set_ylim(0, h + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("update (ES generation / GRPO step)")
        ax.set_ylabel("turns per training episode")
        ax.set_title(f"DocVQA training, turn limit {h}" if runs else "DocVQA: no trained run")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    return save_figure(fig, out_dir, "fig9", bbox_inches="tight")
