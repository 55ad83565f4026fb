"""AHD tables: Table 5 (constructive: objectives and gap-ratio gains), 13 (budgets), 14
(ACO: objectives and EoH / (ESOpt + EoH) - 1), 17 (repeated runs), 18 (runtimes), from the
runs' summary.json files and the reference rows (computed on the runs' instances).

Gap-ratio gain (Table 5's Delta rows): with gap(x) = |x - optimum|,
    Delta = gap(baseline) / gap(Agentic ESOpt + baseline) - 1,
positive when ESOpt lands closer to the optimum (the paper's TSP20 row: Sample 4.3286,
ESOpt 4.2336, optimum 3.8199 gives 0.5087 / 0.4137 - 1 = +22.96%).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from esopt.ahd.problems import get_problem
from esopt.pipeline.ahd import AHD_METHODS, BASELINE_OF, AHDRun
from esopt.report.tables import Table

METHOD_LABELS = {"sample": "Sample", "esopt_sample": "Agentic ESOpt + Sample",
                 "eoh": "EoH", "esopt_eoh": "Agentic ESOpt + EoH"}
SPLIT_LABELS = {
    ("tsp_constructive", "test20"): "TSP N=20 (min)",
    ("tsp_constructive", "test50"): "TSP N=50 (min)",
    ("kp_constructive", "test50"): "KP N=50,W=12.5 (max)",
    ("kp_constructive", "test100"): "KP N=100,W=25 (max)",
    ("asp_constructive", "n15w10"): "ASP n=15,w=10 (max)",
    ("asp_constructive", "n21w15"): "ASP n=21,w=15 (max)",
    ("tsp_aco", "test50"): "TSP N=50", ("tsp_aco", "test100"): "TSP N=100",
    ("cvrp_aco", "test50"): "CVRP N=50,C=50", ("cvrp_aco", "test100"): "CVRP N=100,C=50",
    ("bpp_offline_aco", "test500"): "BPP N=500,C=150",
    ("bpp_offline_aco", "test1000"): "BPP N=1,000,C=150",
}
# Rows the paper prints without a definition the project can reproduce: shown as cited
# values, labelled so, beside the project's own rows (Table 5's ASP Greedy Construct).
CITED_GREEDY = {("asp_constructive", "n15w10"): 1530.0, ("asp_constructive", "n21w15"): 15050.0}
# Table 14's ACO row (ReEvo's seed heuristics; the paper's values) beside the project's.
PAPER_ACO = {("tsp_aco", "test50"): 5.992, ("tsp_aco", "test100"): 8.948,
             ("cvrp_aco", "test50"): 11.355, ("cvrp_aco", "test100"): 18.778,
             ("bpp_offline_aco", "test500"): 208.828, ("bpp_offline_aco", "test1000"): 417.938}


def load_ahd_runs(path: str | Path) -> list[AHDRun]:
    return [AHDRun(**d) for d in json.loads(Path(path).read_text())]


def summary(run: AHDRun) -> dict:
    return json.loads((Path(run.run_dir) / "summary.json").read_text())


def _columns(runs: list[AHDRun], kind: str | None = None) -> list[tuple[str, str]]:
    problems = [p for p in dict.fromkeys(r.problem for r in runs)
                if kind is None or get_problem(p).kind == kind]
    return [(p, s) for p in problems for s in get_problem(p).test_splits]


def _method_means(runs: list[AHDRun], cols) -> dict:
    means = {}
    for method in _methods(runs):
        for p, s in cols:
            vals = [v for v in test_values(runs, method, p, s) if np.isfinite(v)]
            means[(method, p, s)] = float(np.mean(vals)) if vals else float("nan")
    return means


def _instances_row(references: dict, cols) -> list[str]:
    where = references.get("instances", "?")
    return [f"Instances: {where}"] + [f"{references[p][s].get('n_instances', '?')}"
                                       for p, s in cols]


def _methods(runs: list[AHDRun]) -> list[str]:
    present = {r.method for r in runs}
    return [m for m in AHD_METHODS if m in present]


def test_values(runs: list[AHDRun], method: str, problem: str, split: str) -> list[float]:
    """Test objective of each seed's best heuristic (NaN where a run found none)."""
    out = []
    for r in runs:
        if r.method == method and r.problem == problem:
            v = summary(r)["test_objectives"].get(split)
            out.append(float("nan") if v is None else float(v))
    return out


def gap_ratio_gain(baseline: float, esopt: float, optimum: float) -> float:
    """gap(baseline) / gap(esopt) - 1 with gap = |x - optimum| (NaN when undefined)."""
    g_base, g_es = abs(baseline - optimum), abs(esopt - optimum)
    if not (np.isfinite(g_base) and np.isfinite(g_es)) or g_es == 0:
        return float("nan")
    return g_base / g_es - 1


def _fmt(x: float, digits: int = 4) -> str:
    return "–" if not np.isfinite(x) else f"{x:.{digits}f}"


def table5(runs: list[AHDRun], references: dict) -> Table:
    """Constructive problems: Optimal, Greedy Construct, each method, Delta rows."""
    cols = _columns(runs, "constructive")
    header = ["Method"] + [SPLIT_LABELS.get(c, f"{c[0]} {c[1]}") for c in cols]
    rows = [["Optimal"] + [_fmt(references[p][s]["optimum"]) for p, s in cols],
            ["Greedy Construct (project)"] + [_fmt(references[p][s]["greedy"])
                                              for p, s in cols]]
    if any(c in CITED_GREEDY for c in cols):
        rows.append(["Greedy Construct (paper, cited; baseline not defined)"] + [
            _fmt(CITED_GREEDY[c], 0) if c in CITED_GREEDY else "" for c in cols])
    means = _method_means(runs, cols)
    for method in _methods(runs):
        rows.append([METHOD_LABELS[method]] + [_fmt(means[(method, p, s)]) for p, s in cols])
        base = BASELINE_OF.get(method)
        if base and any(r.method == base for r in runs):
            cells = []
            for p, s in cols:
                gain = gap_ratio_gain(means[(base, p, s)], means[(method, p, s)],
                                      references[p][s]["optimum"])
                cells.append("–" if not np.isfinite(gain) else f"{100 * gain:+.2f}%")
            rows.append([f"Δ vs {METHOD_LABELS[base]}"] + cells)
    rows.append(_instances_row(references, cols))
    return header, rows


def objective_ratio_gain(baseline: float, esopt: float) -> float:
    """Table 14's Delta: baseline / esopt - 1 (minimised objectives; positive is better)."""
    if not (np.isfinite(baseline) and np.isfinite(esopt)) or esopt == 0:
        return float("nan")
    return baseline / esopt - 1


def table14(runs: list[AHDRun], references: dict) -> Table:
    """ACO problems: the ACO baseline (project and paper), each method, Delta rows."""
    cols = _columns(runs, "aco")
    header = ["Method"] + [SPLIT_LABELS.get(c, f"{c[0]} {c[1]}") for c in cols]
    if not cols:
        return header, [["(no ACO problem configured)"]]
    rows = [["ACO (project; ReEvo's seed heuristic)"] + [
                _fmt(references[p][s]["baseline"], 3) for p, s in cols],
            ["ACO (paper, cited)"] + [_fmt(PAPER_ACO.get((p, s), float("nan")), 3)
                                      for p, s in cols]]
    means = _method_means(runs, cols)
    for method in _methods(runs):
        rows.append([METHOD_LABELS[method]] + [_fmt(means[(method, p, s)], 3) for p, s in cols])
        base = BASELINE_OF.get(method)
        if base and any(r.method == base for r in runs):
            cells = []
            for p, s in cols:
                gain = objective_ratio_gain(means[(base, p, s)], means[(method, p, s)])
                cells.append("–" if not np.isfinite(gain) else f"{100 * gain:+.2f}%")
            rows.append([f"Δ vs {METHOD_LABELS[base]}"] + cells)
    rows.append(_instances_row(references, cols))
    return header, rows


def table13(runs: list[AHDRun]) -> Table:
    header = ["Method", "Problem", "T", "Batches/generations", "Candidates/batch or generation",
              "ES updates (planned)",
              "ES updates (applied)", "Directions/update", "σ0→σT", "Evaluated"]
    rows, seen = [], set()
    for r in runs:
        key = (r.method, r.problem)
        if key in seen:
            continue
        seen.add(key)
        cfg = r.search_config()
        per_batch = cfg.batch_size if cfg.scaffold == "sample" else (
            cfg.pop_size * (2 + 2 * cfg.mutation_factor))
        s = summary(r)
        sigma = (f"{cfg.es.sigma.sigma_0:g}→{cfg.es.sigma.sigma_T:g} ({cfg.es.sigma.kind})"
                 if cfg.es else "–")
        rows.append([METHOD_LABELS[r.method], r.problem, str(cfg.budget),
                     str(cfg.budget // per_batch), str(per_batch), str(cfg.es_updates),
                     str(s["es_updates"]), str(cfg.directions) if cfg.es else "–",
                     sigma, str(s["evaluated"])])
    return header, rows


def permutation_pvalue(a: list[float], b: list[float], draws: int = 20000, seed: int = 0) -> float:
    """Two-sided permutation test on the difference of means (exact when small)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    pooled = np.concatenate([a, b])
    observed = abs(a.mean() - b.mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(draws):
        perm = rng.permutation(pooled)
        hits += abs(perm[: len(a)].mean() - perm[len(a):].mean()) >= observed - 1e-12
    return (hits + 1) / (draws + 1)


def table17(runs: list[AHDRun]) -> Table:
    header = ["Task", "Baseline", "Agentic ESOpt", "p-value", "Runs"]
    rows = []
    for p, s in _columns(runs):
        for method, base in BASELINE_OF.items():
            if not any(r.method == method for r in runs) or not any(r.method == base
                                                                  for r in runs):
                continue
            a = [v for v in test_values(runs, base, p, s) if np.isfinite(v)]
            b = [v for v in test_values(runs, method, p, s) if np.isfinite(v)]
            fmt = lambda v: (f"{np.mean(v):.4f}±{np.std(v):.4f}" if v else "–")  # noqa: E731
            pv = permutation_pvalue(a, b)
            rows.append([f"{SPLIT_LABELS.get((p, s), s)}, {METHOD_LABELS[base]}", fmt(a), fmt(b),
                         "–" if not np.isfinite(pv) else f"{pv:.4f}", f"{len(a)} vs {len(b)}"])
    return header, rows


def table18(runs: list[AHDRun]) -> Table:
    header = ["Problem", "Method", "End-to-end (min)", "Per evaluation (s)",
              "Per proposal generation (s)", "Valid proposals", "Peak RSS (GB)"]
    rows = []
    for problem in dict.fromkeys(r.problem for r in runs):
        for method in _methods(runs):
            sums = [summary(r) for r in runs if r.problem == problem and r.method == method]
            if not sums:
                continue
            def mean(key, sums=sums):
                return float(np.mean([x[key] for x in sums]))

            rows.append([problem, METHOD_LABELS[method], f"{mean('wall_s') / 60:.2f}",
                         f"{mean('evaluate_s_per_proposal'):.3f}",
                         f"{mean('generate_s_per_proposal'):.2f}",
                         f"{100 * mean('valid_rate'):.1f}%",
                         f"{max(x['peak_rss_mb'] for x in sums) / 1024:.2f}"])
    return header, rows
