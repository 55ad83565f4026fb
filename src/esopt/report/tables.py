"""Table 1 (success by H* with measured memory), Table 2 (training FLOPs and time of the
trained methods, from their ledgers) and Table 7 (ES configurations used)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from esopt.pipeline.spec import ES_METHODS, METHODS, RL_METHODS, RunSpec
from esopt.report.results import final_summary, ledger, peak_memory_mb
from esopt.runtime.checkpoint import read_manifest
from esopt.runtime.memory import critic_parameters, training_state_bytes

METHOD_LABELS = {"base": "Base model", "vanilla_es": "+ Vanilla ES", "esopt": "+ Agentic ESOpt",
                 "grpo": "+ Agentic GRPO †", "grpo_b": "+ Agentic GRPO ‡ (GRPO-B)",
                 "ppo": "+ Agentic PPO", "copes": "+ CoPES", "async_es": "+ Async ES",
                 "lowrank_es": "+ Low-rank ES"}

Table = tuple[list[str], list[list[str]]]  # header, rows


def _by_method(specs: list[RunSpec]) -> dict[str, list[RunSpec]]:
    """The runs of each method, in METHODS order; evaluation-only models are not a method
    (see _by_eval_model)."""
    out: dict[str, list[RunSpec]] = {}
    for s in specs:
        if not s.eval_model:
            out.setdefault(s.method, []).append(s)
    return {m: out[m] for m in METHODS if m in out}


def _by_eval_model(specs: list[RunSpec]) -> dict[str, list[RunSpec]]:
    """The runs of each evaluation-only model (config eval_models), in config order."""
    out: dict[str, list[RunSpec]] = {}
    for s in specs:
        if s.eval_model:
            out.setdefault(s.eval_model, []).append(s)
    return out


def success_stats(specs: list[RunSpec]) -> tuple[float, float, int]:
    """Mean and std (ddof 0) x100 over seeds x evaluation repeats, and the count."""
    rates = [r for s in specs for r in final_summary(s).per_repeat]
    return 100 * float(np.mean(rates)), 100 * float(np.std(rates)), len(rates)


def failed_episodes(specs: list[RunSpec]) -> int:
    """Final-evaluation episodes whose environment raised (counted as unsuccessful)."""
    return sum(int(final_summary(s).failed) for s in specs)


def memory_requirement_gb(spec: RunSpec) -> float:
    """Weights + optimiser state of the run's method on the device, in GiB, from the base
    checkpoint's parameter count (runtime.memory.training_state_bytes), PPO's critic
    included (its size from the checkpoint's config.json); NaN when the checkpoint's
    manifest (or, for PPO, its config) is not there."""
    try:
        n = read_manifest(spec.model)["num_parameters"]
        critic = (critic_parameters(n, json.loads((Path(spec.model) / "config.json")
                                                  .read_text()))
                  if spec.method == "ppo" else 0)
    except (OSError, KeyError, ValueError):
        return float("nan")
    return training_state_bytes(n, spec.method in RL_METHODS, spec.serving_dtype,
                                critic) / 2**30


def _gb(value: float) -> str:
    return "–" if np.isnan(value) else f"{value:.2f}GB"


def table1(specs: list[RunSpec]) -> Table:
    """Rows: evaluation-only models, then methods; columns: the peak memory measured by
    the run's jobs, the weights + optimiser state requirement (the paper's kind of
    number), then success (x100) per H*."""
    horizons = sorted({s.horizon for s in specs})
    header = ["Method", "Peak memory (measured)", "Memory req. (weights + optimiser)"] + [
        f"H*={h}" for h in horizons]
    rows = []
    # Evaluation-only models first (the paper lists Qwen3.5-27B above the trained 4B).
    groups = [(f"{name} (evaluation only)", runs) for name, runs in
              _by_eval_model(specs).items()]
    groups += [(METHOD_LABELS[method], runs) for method, runs in _by_method(specs).items()]
    for label, runs in groups:
        mem_gb = max(peak_memory_mb(s) for s in runs) / 1024
        cells = [label, _gb(mem_gb), _gb(max(memory_requirement_gb(s) for s in runs))]
        for h in horizons:
            at_h = [s for s in runs if s.horizon == h]
            if at_h:
                mean, std, n = success_stats(at_h)
                # One seed x one repeat has no spread to report.
                cell = f"{mean:.2f}±{std:.2f}" if n > 1 else f"{mean:.2f}"
                failed = failed_episodes(at_h)
                # Crashed episodes are unsuccessful, but said apart: not the model's failure.
                cells.append(f"{cell} ({failed} failed)" if failed else cell)
            else:
                cells.append("–")
        rows.append(cells)
    return header, rows


def si(value: float, unit: str) -> str:
    """1.2e15 -> '1.20 P<unit>'."""
    for exp, prefix in ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M")):
        if abs(value) >= 10 ** exp:
            return f"{value / 10 ** exp:.2f} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def duration(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


TIME_COLUMNS = ("load_s", "generate_s", "noise_s", "score_s", "update_s", "save_s")


def training_cost(spec: RunSpec) -> tuple[float, float, float, int]:
    """(FLOPs, wall-clock seconds, worker-seconds, training episodes) of a run from its
    ledger. Worker-seconds: every phase of every job summed, model loading included (an
    ES run loads the model in each DAG job; an RL run once), so parallel ES shards add up.
    Wall-clock: the run's elapsed time (`wall_s` per step: an RL or async run's process
    time; an ES generation's slowest shard + its update, see pipeline.ledgers.generation_wall_s);
    a ledger without `wall_s` (written before it existed) falls back to worker-seconds."""
    rows = ledger(spec)
    worker_s = float(sum(sum(rows[c]) for c in TIME_COLUMNS if c in rows))
    wall_s = float(sum(rows["wall_s"])) if "wall_s" in rows else worker_s
    return float(sum(rows["flops"])), wall_s, worker_s, int(sum(rows["episodes"]))


def training_failures(spec: RunSpec) -> tuple[int, int]:
    """(failed episodes, directions excluded from ES updates) of a run, from its ledger:
    environment errors, which are never scored as a silent 0."""
    rows = ledger(spec)
    return (int(sum(rows.get("failed_episodes", []))),
            int(sum(rows.get("excluded_directions", []))))


def _failures_cell(failures: list[tuple[int, int]], es: bool) -> str:
    """Total over seeds: `episodes` (RL) or `episodes / directions excluded` (ES)."""
    episodes, excluded = (sum(f) for f in zip(*failures, strict=True))
    return f"{episodes} / {excluded}" if es else str(episodes)


def table2(specs: list[RunSpec]) -> Table:
    """Rows: trained methods; per H*: training FLOPs, wall-clock time, worker time and
    episodes (mean over seeds), and failed episodes (environment errors; for ES also the
    directions they excluded from the updates), summed over seeds. The episodes say how
    much training each method's budget bought."""
    horizons = sorted({s.horizon for s in specs})
    header = ["Method"] + [f"H*={h} {c}" for h in horizons
                           for c in ("FLOPs", "Wall-clock", "Worker time", "Episodes",
                                     "Failed")]
    rows = []
    for method, runs in _by_method(specs).items():
        if method == "base":
            continue
        cells = [METHOD_LABELS[method].lstrip("+ ")]
        for h in horizons:
            at_h = [s for s in runs if s.horizon == h]
            if at_h:
                costs = [training_cost(s) for s in at_h]
                flops, wall_s, worker_s, episodes = (float(np.mean(c))
                                                     for c in zip(*costs, strict=True))
                cells += [si(flops, "FLOPs"), duration(wall_s), duration(worker_s),
                          f"{episodes:.0f}",
                          _failures_cell([training_failures(s) for s in at_h],
                                         method in ES_METHODS)]
            else:
                cells += ["–"] * 5
        rows.append(cells)
    return header, rows


def _sigma_text(spec: RunSpec) -> str:
    s = spec.es.sigma
    if s.kind == "constant":
        return f"{s.sigma_0:.1e} constant"
    return f"{s.sigma_0:.1e}→{s.sigma_T:.1e} {s.kind}"


def table7(specs: list[RunSpec]) -> Table:
    """One row per (ES method, H*): the configuration actually run."""
    header = ["Profile", "Board", "Mask count (H*)", "Max turns", "G", "Tasks/direction",
              "Generations", "alpha", "Sigma schedule"]
    seen, rows = set(), []
    for s in sorted(specs, key=lambda s: (s.method, s.horizon)):
        if s.method not in ES_METHODS or (s.method, s.horizon) in seen:
            continue
        seen.add((s.method, s.horizon))
        size = s.env_options.get("size", 9)
        max_turns = s.env_options.get("max_turns") or 3 * s.horizon
        rows.append([METHOD_LABELS[s.method].lstrip("+ "), f"{size}x{size}", str(s.horizon),
                     str(max_turns), str(s.es.population_size), str(s.tasks_per_direction),
                     str(s.es.generations), f"{s.es.alpha:.1e}", _sigma_text(s)])
    return header, rows


def to_markdown(table: Table) -> str:
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(table[0])
    writer.writerows(table[1])
    return buf.getvalue()


def to_latex(table: Table) -> str:
    header, rows = table

    def esc(x: str) -> str:
        return (x.replace("\\", r"\textbackslash{}").replace("_", r"\_").replace("%", r"\%")
                .replace("±", r"$\pm$").replace("→", r"$\to$").replace("&", r"\&"))

    lines = [r"\begin{tabular}{" + "l" * len(header) + "}", r"\toprule",
             " & ".join(esc(h) for h in header) + r" \\", r"\midrule"]
    lines += [" & ".join(esc(c) for c in r) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def write_table(table: Table, out_dir: str | Path, name: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.csv").write_text(to_csv(table))
    (out / f"{name}.md").write_text(to_markdown(table))
    (out / f"{name}.tex").write_text(to_latex(table))
