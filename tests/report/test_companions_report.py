"""The companion-methods table and figure from synthetic run outputs."""


import pyarrow as pa
import pytest

from esopt.pipeline.config import run_specs
from esopt.report.companions import companion_table, write_companions
from esopt.runtime.atomic import write_parquet_atomic
from tests.pipeline.test_config import base_config
from tests.support.records import eval_summary_json


@pytest.fixture()
def specs(tmp_path, monkeypatch):
    cfg = base_config()
    cfg["sudoku"]["horizons"] = [1]
    cfg["sudoku"]["methods"] = ["base", "vanilla_es", "copes", "async_es", "lowrank_es"]
    cfg["sudoku"]["es"].update(generations=2, keep_every=1, copes={"subspaces": 2},
                               lowrank_es={"rank": 3})
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    success = {"base": 0.25, "vanilla_es": 0.5, "copes": 0.75, "async_es": 0.5,
               "lowrank_es": 0.25}
    for s in specs:
        for g in s.kept_generations():
            if g == 0 and s.method != "base":
                continue
            summary = {"generation": g, "success_mean": success[s.method] if g else 0.25,
                       "success_std": 0.0, "per_repeat": [success[s.method]],
                       "peak_memory_mb": 1.0, "failed": 0}
            for path in ([f"eval/gen{g:03d}.parquet"]
                         + (["final/eval.parquet"] if g == s.generations else [])):
                # Four tasks; the method solves the first success x 4 of them.
                solved = round(4 * (success[s.method] if g else 0.25))
                write_parquet_atomic(pa.table({"task_seed": [0, 1, 2, 3],
                                               "success": [i < solved for i in range(4)]}),
                                     tmp_path / s.run_dir / path,
                                     {"summary": eval_summary_json(**summary)})
        if s.method != "base":
            asynchrony = {"accepted": [4, 4], "stale_accepted": [0, 3],
                          "max_lag_used": [0, 1]} if s.method == "async_es" else {}
            write_parquet_atomic(pa.table({
                "step": [1, 2], "reward_mean": [0.1, 0.4 if s.method == "copes" else 0.2],
                "episodes": [64, 72 if s.method == "async_es" else 64],
                "peak_memory_mb": [1.0, 1.0], "flops": [1.0, 1.0], **asynchrony}),
                tmp_path / s.run_dir / "ledger.parquet")
    return specs


def test_companion_table_rows(specs):
    header, rows = companion_table(specs)
    by = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert set(by) == {"Vanilla ES", "CoPES", "Async ES", "Low-rank ES"}
    assert by["CoPES"]["Settings"] == "K=2, N/K=4, sigma*sqrt(K), step sqrt(K) x ES's"
    assert by["Low-rank ES"]["Settings"] == "r=3, antithetic, vectors full-rank noise"
    assert by["Async ES"]["Settings"].startswith("L=1")
    assert by["Async ES"]["Episodes"] == "136"
    assert by["Async ES"]["Stale results used"] == "3 of 8 (lags <= 1)"
    assert by["CoPES"]["Stale results used"] == "–"
    assert by["CoPES"]["Train reward (first -> last)"] == "0.100 -> 0.400"
    assert by["CoPES"]["Held-out success (gen 0 -> final)"] == "25.0 -> 75.0 ± 0.0"
    # CoPES solves tasks 0-2, base task 0: +50 points, every resample between 0 and 100.
    mean, ci = by["CoPES"]["Final - base (paired 95% CI)"].split(" [")
    lo, hi = (float(x) for x in ci.rstrip("]").split(", "))
    assert mean == "+50.0" and 0 <= lo < 50 < hi <= 100
    assert by["Low-rank ES"]["Final - base (paired 95% CI)"] == "+0.0 [+0.0, +0.0]"


def test_companion_outputs_are_written_with_the_papers_notes(specs, tmp_path):
    write_companions(specs, tmp_path / "tables", tmp_path / "figures")
    md = (tmp_path / "tables" / "companions.md").read_text()
    assert "92%" in md and "CoPES" in md
    assert (tmp_path / "figures" / "companions.png").stat().st_size > 1000
    assert (tmp_path / "tables" / "companions.csv").is_file()
