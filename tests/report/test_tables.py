"""Table 1 and Table 7 from synthetic run outputs: the numbers, not just the layout."""

import json

import pyarrow as pa
import pytest

from esopt.pipeline.config import run_specs
from esopt.report.tables import table1, table2, table7, to_latex, to_markdown
from esopt.runtime.atomic import write_parquet_atomic
from tests.pipeline.test_config import base_config
from tests.support.records import eval_summary_json

RL = ("grpo", "grpo_b", "ppo")


def _write_eval(run_dir, generation, per_repeat, peak, failed=0):
    summary = {"generation": generation, "success_mean": sum(per_repeat) / len(per_repeat),
               "success_std": 0.0, "per_repeat": per_repeat, "peak_memory_mb": peak,
               "failed": failed}
    table = pa.table({"success": [True]})
    write_parquet_atomic(table, run_dir / "eval" / f"gen{generation:03d}.parquet",
                         {"summary": eval_summary_json(**summary)})
    write_parquet_atomic(table, run_dir / "final" / "eval.parquet",
                         {"summary": eval_summary_json(**summary)})


@pytest.fixture()
def specs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run dirs are relative, as in the workflow
    return write_sudoku_runs(tmp_path)


def write_sudoku_runs(tmp_path):
    """Every Table 1 run at H*=1, 2 with seeds 0, 1: evaluations and training ledgers."""
    cfg = base_config()
    cfg["sudoku"]["seeds"] = [0, 1]
    specs = run_specs(cfg)
    rates = {"base": [0.25, 0.25], "vanilla_es": [0.5, 0.25], "esopt": [0.75, 0.5],
             "grpo": [0.5, 0.5], "grpo_b": [0.5, 0.75], "ppo": [0.0, 0.25]}
    for s in specs:
        per_repeat = rates[s.method] if s.horizon == 1 else [0.0, 0.0]
        _write_eval(tmp_path / s.run_dir, s.generations, per_repeat,
                    peak=1000 + 100 * s.seed + (500 if s.method != "base" else 0),
                    failed=1 if (s.method, s.horizon) == ("ppo", 1) else 0)
        if s.method != "base":  # training ledgers: RL peaks above their evaluations
            steps = list(range(1, s.generations + 1))
            write_parquet_atomic(pa.table({
                "step": steps, "peak_memory_mb": [8000.0 if s.method in RL else 900.0] * len(steps),
                "flops": [1e12 * (1 + s.seed)] * len(steps), "generate_s": [30.0] * len(steps),
                "update_s": [60.0 if s.method in RL else 0.0] * len(steps),
                "load_s": [5.0] * len(steps), "turns": [1.5] * len(steps),
                # ES shards run in parallel: the run's wall-clock is below its phase sum
                "wall_s": [95.0 if s.method in RL else 20.0] * len(steps),
                "episodes": [64 if s.method in RL else 8] * len(steps),
                # ES at H*=1: one failed episode per update, which excluded its direction
                "failed_episodes": [int((s.method, s.horizon) == ("esopt", 1))] * len(steps),
                "excluded_directions": [int((s.method, s.horizon) == ("esopt", 1))]
                * len(steps)}),
                tmp_path / s.run_dir / "ledger.parquet")
    return specs


def test_table1_pools_seeds_and_repeats_and_takes_the_peak_memory(specs):
    header, rows = table1(specs)
    assert header == ["Method", "Peak memory (measured)", "Memory req. (weights + optimiser)",
                      "H*=1", "H*=2"]
    by = {r[0]: r for r in rows}
    # esopt H*=1: per-repeat rates 0.75, 0.5 for each of 2 seeds -> mean 62.5, std 12.5
    assert by["+ Agentic ESOpt"][3] == "62.50±12.50"
    assert by["+ Agentic ESOpt"][4] == "0.00±0.00"
    assert by["Base model"][3] == "25.00±0.00"
    assert by["Base model"][2] == "–"  # no base checkpoint manifest here
    assert by["Base model"][1] == f"{1100 / 1024:.2f}GB"
    # Trained runs: their training jobs' ledgers, not their evaluations (1600 MB here).
    assert by["+ Vanilla ES"][1] == f"{900 / 1024:.2f}GB"
    assert by["+ Agentic GRPO †"][1] == f"{8000 / 1024:.2f}GB"  # the training step's peak
    assert by["+ Agentic GRPO ‡ (GRPO-B)"][3] == "62.50±12.50"
    assert [r[0] for r in rows][-3:] == ["+ Agentic GRPO †", "+ Agentic GRPO ‡ (GRPO-B)",
                                         "+ Agentic PPO"]


def test_table2_sums_each_runs_ledger_and_averages_seeds(specs):
    header, rows = table2(specs)
    assert header == ["Method"] + [f"H*={h} {c}" for h in (1, 2) for c in (
        "FLOPs", "Wall-clock", "Worker time", "Episodes", "Failed")]
    by = {r[0]: r for r in rows}
    assert "Base model" not in by
    esopt, grpo = specs_of(specs, "esopt"), specs_of(specs, "grpo")
    # seeds 0, 1 -> 1e12 and 2e12 FLOPs per update, mean 1.5e12 x updates
    assert by["Agentic ESOpt"][1] == f"{1.5 * esopt.generations:.2f} TFLOPs"
    assert by["Agentic GRPO †"][1] == f"{1.5 * grpo.generations:.2f} TFLOPs"
    # wall-clock: the ledger's wall_s per update, not the sum of the phases
    assert by["Agentic ESOpt"][2] == f"{20 * esopt.generations / 60:.1f} min"
    assert by["Agentic GRPO †"][2] == f"{95 * grpo.generations / 60:.1f} min"
    # worker time: load 5 + generate 30 (+ update 60 for RL) seconds per update
    assert by["Agentic ESOpt"][3] == f"{35 * esopt.generations / 60:.1f} min"
    assert by["Agentic GRPO †"][3] == f"{95 * grpo.generations / 60:.1f} min"
    assert by["Agentic ESOpt"][4] == str(8 * esopt.generations)
    assert by["Agentic GRPO †"][4] == str(64 * grpo.generations)
    # failed episodes / excluded directions, summed over the 2 seeds (only ES H*=1 had any)
    assert by["Agentic ESOpt"][5] == f"{2 * esopt.generations} / {2 * esopt.generations}"
    assert by["Agentic ESOpt"][10] == "0 / 0"
    assert by["Agentic GRPO †"][5] == "0"


def test_table1_names_failed_evaluation_episodes_apart(specs):
    _, rows = table1(specs)
    by = {r[0]: r for r in rows}
    assert by["+ Agentic PPO"][3] == "12.50±12.50 (2 failed)"  # 1 per seed
    assert by["+ Agentic ESOpt"][3] == "62.50±12.50"


def specs_of(specs, method):
    return next(s for s in specs if s.method == method)


def test_table7_lists_each_es_configuration_once(specs):
    header, rows = table7(specs)
    assert len(rows) == 2 * 2  # 2 ES methods x 2 horizons, seeds collapsed
    esopt_h2 = next(r for r in rows if r[0] == "Agentic ESOpt" and r[2] == "2")
    assert esopt_h2[3] == "6"  # 3 * H*
    assert "cosine" in esopt_h2[-1]


def test_latex_and_markdown_escape_and_align():
    table = (["Method", "H*=1"], [["a_b", "1.00±0.50"]])
    tex = to_latex(table)
    assert r"a\_b" in tex and r"$\pm$" in tex and tex.count(r"\\") == 2
    md = to_markdown(table)
    assert md.splitlines()[1] == "|---|---|"


@pytest.mark.parametrize("dtype, es_gb, rl_gb, ppo_gb", [("float32", 4.0, 20.0, 36.0),
                                                          ("bfloat16", 2.0, 22.0, 38.0)])
@pytest.mark.parametrize("tied", [True, False])
def test_table1_memory_requirement_counts_weights_optimiser_state_and_critic(
        specs, dtype, es_gb, rl_gb, ppo_gb, tied):
    """2**30 parameters: inference / ES hold the serving weights; the RL baselines also
    the reference, float32 gradients and AdamW moments (+ the float32 master and the
    serving-precision gradients when serving in bf16); PPO also its float32 critic with
    gradients and moments (16 bytes a parameter): the model without an untied LM head,
    plus a value head."""
    from dataclasses import replace
    from pathlib import Path

    model = Path(specs[0].model)
    model.mkdir(parents=True)
    (model / "manifest.json").write_text(json.dumps({"num_parameters": 2**30,
                                                     "sha256": "0" * 64}))
    # An untied LM head of 2**28 parameters (vocab 2**18 x d 2**10) is not the critic's.
    (model / "config.json").write_text(json.dumps(
        {"hidden_size": 2**10, "vocab_size": 2**18, "tie_word_embeddings": tied}))
    _, rows = table1([replace(s, serving_dtype=dtype) for s in specs])
    by = {r[0]: r for r in rows}
    assert by["Base model"][2] == by["+ Agentic ESOpt"][2] == f"{es_gb:.2f}GB"
    assert by["+ Agentic GRPO †"][2] == f"{rl_gb:.2f}GB"
    critic_gb = 16 * (2**30 - (0 if tied else 2**28) + 2**10) / 2**30
    assert by["+ Agentic PPO"][2] == f"{rl_gb + critic_gb:.2f}GB"
    assert by["+ Agentic PPO"][2] == (f"{ppo_gb:.2f}GB" if tied else f"{ppo_gb - 4:.2f}GB")


def test_eval_only_models_get_rows_of_their_own_first(tmp_path, monkeypatch):
    from pathlib import Path

    cfg = base_config()
    cfg["sudoku"].update(methods=["base", "esopt"], horizons=[1])
    cfg["eval_models"] = ["Qwen/Qwen3.5-27B"]
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    for s in specs:
        big = bool(s.eval_model)
        _write_eval(tmp_path / s.run_dir, s.generations, [0.75 if big else 0.25] * 2,
                    peak=50_000 if big else 1000)
        if s.generations:
            write_parquet_atomic(pa.table({"step": [1], "peak_memory_mb": [900.0],
                                           "flops": [1.0], "episodes": [8]}),
                                 tmp_path / s.run_dir / "ledger.parquet")
    big = next(s for s in specs if s.eval_model)
    Path(big.model).mkdir(parents=True)
    (Path(big.model) / "manifest.json").write_text(json.dumps({"num_parameters": 2**30,
                                                               "sha256": "0" * 64}))
    _, rows = table1(specs)
    assert [r[0] for r in rows] == ["Qwen/Qwen3.5-27B (evaluation only)", "Base model",
                                    "+ Agentic ESOpt"]
    assert rows[0][1:] == [f"{50_000 / 1024:.2f}GB", "4.00GB", "75.00±0.00"]
    assert rows[1][3] == "25.00±0.00"  # the base row holds only the base model's runs
    assert all(r[0] != "Qwen/Qwen3.5-27B" for r in table2(specs)[1])
