"""The web experiment's report: Table 4 (success per site category), Figure 10 (success
every k ES updates) and Table 12 (the four adaptation conditions).

Conditions, as Table 3's: No Skill (the base model), Agentic ESOpt + No Skill (the final
ES checkpoint), Trace2Skill and Agentic ESOpt + Trace2Skill (with the distilled SKILL.md).
Numbers are success rates in percent, mean +- population std (ddof 0) over the training
seeds (the paper's "average over 3 runs"). An episode's site comes from its task seed and
the evaluation's environment options, so a crashed episode still counts, as a failure.
"""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from esopt.pipeline.records import EvalRecord  # noqa: E402
from esopt.pipeline.spec import RunSpec  # noqa: E402
from esopt.report.figures import save_figure  # noqa: E402
from esopt.report.math_report import CONDITIONS, _eval_path  # noqa: E402
from esopt.report.tables import Table  # noqa: E402

SITE_LABELS = {"forum": "Reddit", "gitlab": "GitLab", "cms": "CMS", "map": "Map", "shop": "OSS"}
"""The paper's column names of the five site categories."""


@functools.lru_cache(maxsize=8)
def _task_sites(options: tuple) -> tuple[str, ...]:
    from esopt.envs import make_env

    return tuple(t.site for t in make_env("web", **dict(options)).tasks)


def site_successes(path: str | Path, eval_options: dict) -> dict[str, list[bool]]:
    """Episode successes of an evaluation Parquet, by site (and "all")."""
    sites = _task_sites(tuple(sorted(eval_options.items())))
    t = EvalRecord.read_columns(path, ["task_seed", "success"])
    out: dict[str, list[bool]] = {"all": []}
    for seed, ok in zip(t["task_seed"], t["success"], strict=True):
        out.setdefault(sites[seed % len(sites)], []).append(bool(ok))
        out["all"].append(bool(ok))
    return out


def _cell(values: list[float]) -> str:
    return f"{np.mean(values):.2f} ± {np.std(values):.2f}" if values else "-"


def _condition_runs(specs: list[RunSpec]):
    """(label, [(spec, evaluation path)]) per condition with at least one evaluation."""
    for label, method, kind in CONDITIONS:
        runs = [(s, _eval_path(s, kind)) for s in specs
                if s.method == method and not s.eval_model and _eval_path(s, kind).exists()]
        if runs:
            yield label, runs


def table4(specs: list[RunSpec]) -> Table:
    """Success (%) per site category and over all test tasks, per condition."""
    header = ["Turns", "Condition", *SITE_LABELS.values(), "Avg", "Tasks", "Runs"]
    rows = []
    for h in sorted({s.horizon for s in specs}):
        for label, runs in _condition_runs([s for s in specs if s.horizon == h]):
            per_run = [site_successes(path, s.eval_env_kwargs) for s, path in runs]
            cells = [_cell([100 * np.mean(r[site]) for r in per_run if r.get(site)])
                     for site in [*SITE_LABELS, "all"]]
            rows.append([str(h), label, *cells, str(len(per_run[0]["all"])), str(len(runs))])
    return header, rows


def table12(specs: list[RunSpec]) -> Table:
    """Success (%) of the four adaptation conditions and the change from No Skill."""
    header = ["Turns", "Condition", "Success (%)", "Δ vs No Skill (points)", "Runs"]
    rows = []
    for h in sorted({s.horizon for s in specs}):
        base = None
        for label, runs in _condition_runs([s for s in specs if s.horizon == h]):
            rates = [100 * np.mean(site_successes(p, s.eval_env_kwargs)["all"]) for s, p in runs]
            base = np.mean(rates) if label == "No Skill" else base
            delta = f"{np.mean(rates) - base:+.2f}" if base is not None else "-"
            rows.append([str(h), label, _cell(rates), delta, str(len(runs))])
    return header, rows


def success_curve(spec: RunSpec, base_spec: RunSpec | None) -> list[tuple[int, float]]:
    """(updates, success %) of one ES run's kept evaluations, from the base model's (0)."""
    points = []
    for g in spec.kept_generations():
        path = Path(spec.run_dir) / "eval" / f"gen{g:03d}.parquet"
        if g == 0 and base_spec is not None:
            path = Path(base_spec.run_dir) / "final" / "eval.parquet"
        if path.exists():
            points.append((g, 100 * np.mean(site_successes(path, spec.eval_env_kwargs)["all"])))
    return points


def figure10(specs: list[RunSpec], out_dir: str | Path) -> list[Path]:
    """Held-out success every k ES updates (mean +- std over seeds), per turn budget."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for h in sorted({s.horizon for s in specs}):
        runs = [s for s in specs if s.method == "esopt" and s.horizon == h and not s.eval_model]
        bases = {s.seed: s for s in specs
                 if s.method == "base" and s.horizon == h and not s.eval_model}
        curves = [dict(success_curve(s, bases.get(s.seed))) for s in runs]
        gens = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
        if not gens:
            continue
        mean = [np.mean([c[g] for c in curves]) for g in gens]
        std = [np.std([c[g] for c in curves]) for g in gens]
        ax.errorbar(gens, mean, yerr=std, marker="o", capsize=3,
                    label=f"Agentic ESOpt, {h} turns ({len(curves)} runs)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    top = max((line.get_ydata().max() for line in ax.get_lines() if len(line.get_ydata())),
              default=0.0)
    ax.set_ylim(-1, min(101, max(10.0, top + 5)))  # percent; a flat 0 stays in view
    ax.set_xlabel("ES updates")
    ax.set_ylabel("held-out success (%)")
    ax.set_title("WebArena-Lite-style tasks: success during ES")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return save_figure(fig, out_dir, "fig10", bbox_inches="tight")
