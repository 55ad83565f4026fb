"""`esopt status`: how far each run of the current config has got, from its results files.

The config is assembled as the Snakefile does: config/config.yaml, then the scale file
its `scale` names, then `--configfile`s, then `--config key=value` (values read as YAML),
validated against the schema (which fills the defaults). Per run: generations (or RL
steps) done out of planned, the mean reward of the last reward table, and the measured
seconds per generation (the fan-out's wall time + the update's, from directions.done.json
and update.json), so the time left is (planned - done) x s/gen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from esopt.pipeline.config import merge_config, parse_config, run_specs, scale_file
from esopt.pipeline.records import EvalRecord, RewardTable, UpdateManifest, read_json
from esopt.pipeline.spec import ES_METHODS, RL_METHODS, RunSpec
from esopt.runtime.ledger import read_ledger
from esopt.runtime.progress import format_seconds


def parse_overrides(pairs: list[str]) -> dict:
    """`key=value` pairs as Snakemake's --config reads them (values parsed as YAML)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--config: expected key=value, got {pair!r}")
        out[key] = yaml.safe_load(value)
    return out


def load_config(root: str | Path = ".", configfiles: list[str] = (),
                overrides: dict | None = None) -> dict:
    """The workflow's config, merged and validated as the Snakefile does."""
    root = Path(root)
    overrides = overrides or {}
    config = merge_config(yaml.safe_load((root / "config/config.yaml").read_text()), overrides)
    scale = scale_file(root, config.get("scale", "tiny"))
    config = merge_config(config, yaml.safe_load(scale.read_text()) or {})
    for f in configfiles:
        config = merge_config(config, yaml.safe_load(Path(f).read_text()) or {})
    config = merge_config(config, overrides)
    parse_config(config)  # strict, before the schema fills defaults (as the Snakefile)
    from snakemake.utils import validate

    validate(config, str(root / "workflow/schemas/config.schema.yaml"))
    return config


def _relocate(spec: RunSpec, results: Path) -> Path:
    return results / Path(spec.run_dir).relative_to("results")


def run_status(spec: RunSpec, results: str | Path = "results") -> dict:
    """Progress of one run from what it wrote under `results`."""
    run = _relocate(spec, Path(results))
    planned = spec.generations
    row = {"run": spec.run_dir.removeprefix("results/"), "planned": planned, "done": 0,
           "last_reward": float("nan"), "s_per_gen": float("nan"),
           "final_success": float("nan")}
    if spec.method in ES_METHODS:
        done, seconds = 0, []
        while done < planned and (run / f"gen{done + 1:03d}" / "update.json").is_file():
            update = UpdateManifest.read(run / f"gen{done + 1:03d}" / "update.json")
            marker = run / f"gen{done:03d}" / "directions.done.json"
            if marker.is_file():
                seconds.append(read_json(marker, "directions marker")["wall_s"]
                               + update.update_wall_s)
            done += 1
        tables = sorted(run.glob("gen*/rewards.parquet"))
        if tables:
            row["last_reward"] = float(np.mean(RewardTable.read(tables[-1]).fitness))
        row.update(done=done, s_per_gen=float(np.mean(seconds)) if seconds else float("nan"))
    elif spec.method in RL_METHODS and (run / "ledger.parquet").is_file():
        ledger = read_ledger(run / "ledger.parquet")
        seconds = [sum(ledger[k][i] for k in ("load_s", "generate_s", "score_s", "update_s",
                                               "save_s") if k in ledger)
                   for i in range(len(ledger["step"]))]
        row.update(done=len(ledger["step"]), last_reward=ledger["reward_mean"][-1],
                   s_per_gen=float(np.mean(seconds)))
    final = run / "final" / "eval.parquet"
    if final.is_file():
        row["final_success"] = EvalRecord.read_summary(final).success_mean
    return row


def _fmt(x: float, spec: str) -> str:
    return "-" if x != x else format(x, spec)


def format_status(rows: list[dict]) -> str:
    """A fixed-width table, one line per run, and the time left in total."""
    width = max([len(r["run"]) for r in rows] + [3])
    lines = [f"{'run':<{width}}  {'gens':>7}  {'last reward':>11}  {'s/gen':>7}  "
             f"{'left':>7}  {'final success':>13}"]
    left_total = 0.0
    for r in rows:
        left = (r["planned"] - r["done"]) * r["s_per_gen"] if r["done"] < r["planned"] else 0.0
        left_total += left if left == left else 0.0
        lines.append(f"{r['run']:<{width}}  {r['done']:>3}/{r['planned']:<3}  "
                     f"{_fmt(r['last_reward'], '.4f'):>11}  {_fmt(r['s_per_gen'], '.1f'):>7}  "
                     f"{format_seconds(left) if left == left else '?':>7}  "
                     f"{_fmt(r['final_success'], '.3f'):>13}")
    done = sum(r["done"] for r in rows)
    planned = sum(r["planned"] for r in rows)
    lines.append(f"{len(rows)} runs, {done}/{planned} generations done, about "
                 f"{format_seconds(left_total)} of generations left (measured s/gen)")
    return "\n".join(lines)


def status(results: str | Path = "results", root: str | Path = ".",
           configfiles: list[str] = (), overrides: dict | None = None) -> list[dict]:
    """run_status of every run of the config."""
    return [run_status(s, results) for s in run_specs(load_config(root, configfiles, overrides))]
