"""Table 1 and Table 7 from synthetic run outputs: the numbers, not just the layout."""

import json

import pyarrow as pa
import pytest

from esopt.agent.trajectories import write_parquet_atomic
from esopt.pipeline.config import run_specs
from esopt.report.tables import table1, table7, to_latex, to_markdown
from tests.pipeline.test_config import base_config


def _write_eval(run_dir, generation, per_repeat, peak):
    summary = {"generation": generation, "success_mean": sum(per_repeat) / len(per_repeat),
               "success_std": 0.0, "per_repeat": per_repeat, "peak_rss_mb": peak}
    table = pa.table({"success": [True]})
    write_parquet_atomic(table, run_dir / "eval" / f"gen{generation:03d}.parquet",
                         {"summary": json.dumps(summary)})
    write_parquet_atomic(table, run_dir / "final" / "eval.parquet",
                         {"summary": json.dumps(summary)})


@pytest.fixture()
def specs(tmp_path, monkeypatch):
    cfg = base_config()
    cfg["sudoku"]["seeds"] = [0, 1]
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)  # run dirs are relative, as in the workflow
    rates = {"base": [0.25, 0.25], "vanilla_es": [0.5, 0.25], "esopt": [0.75, 0.5]}
    for s in specs:
        per_repeat = rates[s.method] if s.horizon == 1 else [0.0, 0.0]
        _write_eval(tmp_path / s.run_dir, s.generations, per_repeat,
                    peak=1000 + 100 * s.seed + (500 if s.method != "base" else 0))
    return specs


def test_table1_pools_seeds_and_repeats_and_takes_the_peak_memory(specs):
    header, rows = table1(specs)
    assert header == ["Method", "Peak mem (RSS)", "H*=1", "H*=2"]
    by = {r[0]: r for r in rows}
    # esopt H*=1: per-repeat rates 0.75, 0.5 for each of 2 seeds -> mean 62.5, std 12.5
    assert by["+ Agentic ESOpt"][2] == "62.50±12.50"
    assert by["+ Agentic ESOpt"][3] == "0.00±0.00"
    assert by["Base model"][2] == "25.00±0.00"
    assert by["Base model"][1] == f"{1100 / 1024:.2f}GB"
    assert by["+ Vanilla ES"][1] == f"{1600 / 1024:.2f}GB"


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
