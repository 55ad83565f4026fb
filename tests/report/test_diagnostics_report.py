"""The ES diagnostics table and figure from crafted ledgers of the tiny `all`'s ES runs."""

import json

import pyarrow.parquet as pq
import pytest
import yaml

from esopt.pipeline.config import run_specs
from esopt.report import diagnostics
from esopt.report.diagnostics import diagnosed_runs, diagnostics_table, write_diagnostics
from esopt.runtime.ledger import Ledger
from tests.workflow.conftest import REPO


@pytest.fixture()
def specs(tmp_path, monkeypatch):
    """The default config's runs (Sudoku and Countdown, base and ESOpt) with ledgers of
    two generations for the ES runs; Sudoku's also with its Table 6 record."""
    specs = run_specs(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    monkeypatch.chdir(tmp_path)
    for s in specs:
        if s.method == "base":
            continue
        ledger = Ledger(s.run_dir, s.method)
        parts = ([{"solved": 0.25}, {"solved": 0.5}] if s.env == "sudoku" else
                 [{"format": 0.08, "correct": 0.2}, {"format": 0.09, "correct": 0.3}])
        for g in (1, 2):
            ledger.end_step(
                g, peak_memory_mb=1.0, flops=1.0, wall_s=1.0, load_s=0.0, generate_s=1.0,
                score_s=0.0, update_s=0.0, noise_s=0.0, save_s=0.0, flops_generate=1.0,
                flops_score=0.0, flops_train=0.0, episodes=8, reward_mean=0.3,
                reward_std=0.1, reward_min=0.0, reward_max=1.0, success=0.3, turns=1.0,
                tokens=4, failed_episodes=0, excluded_directions=0,
                tied_fraction=1.0 if g == 1 else 0.5, zero_signal=g == 1,
                intended_norm=0.0 if g == 1 else 2.0, realised_norm=0.0 if g == 1 else 1.0,
                realised_cosine=None if g == 1 else 0.5,
                unchanged_fraction=1.0 if g == 1 else 0.25,
                reward_components=json.dumps(parts[g - 1]), distinct_completions=0.75)
        ledger.write(tmp_path / s.run_dir / "ledger.parquet")
        if s.env == "sudoku":
            (tmp_path / s.run_dir / "final").mkdir(parents=True)
            (tmp_path / s.run_dir / "final" / "update_magnitudes.json").write_text(json.dumps(
                {"multiples": [2 / 3, 1.0, 4 / 3], "fractions": [0.8, 0.9, 0.99]}))
    return specs


def test_every_es_run_of_the_tiny_all_has_its_diagnostics_row(specs):
    es_runs = [s for s in specs if s.method == "esopt"]
    assert len(es_runs) == 2 and diagnosed_runs(specs) == es_runs
    header, rows = diagnostics_table(specs)
    by = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert set(by) == {"sudoku Agentic ESOpt", "countdown Agentic ESOpt"}
    sudoku, countdown = by["sudoku Agentic ESOpt"], by["countdown Agentic ESOpt"]
    assert sudoku["Zero-signal generations"] == "1 of 2"
    assert sudoku["Largest tied group / G"] == "0.75"
    # averaged over the generations that moved: the second
    assert sudoku["Realised / intended norm"] == "0.500"
    assert sudoku["Cosine (realised, intended)"] == "0.500"
    assert sudoku["Weights unchanged"] == "0.2500"
    assert sudoku["Reward parts (last generation)"] == "solved 0.500"
    assert countdown["Reward parts (last generation)"] == "correct 0.300, format 0.090"
    assert sudoku["Distinct completions"] == "0.75"
    assert sudoku["|Δθ| ≤ sigma_0 (Table 6)"] == "90.00%"
    assert countdown["|Δθ| ≤ sigma_0 (Table 6)"] == "–"  # no record made


def test_the_figure_draws_every_run_in_every_panel(specs, tmp_path, monkeypatch):
    seen = []
    real = diagnostics.save_figure
    monkeypatch.setattr(diagnostics, "save_figure",
                        lambda fig, out, stem: seen.append(fig) or real(fig, out, stem))
    write_diagnostics(specs, tmp_path / "tables", tmp_path / "figures")
    assert (tmp_path / "figures" / "diagnostics.png").stat().st_size > 10_000
    assert (tmp_path / "tables" / "diagnostics.md").read_text().count("Agentic ESOpt") == 2
    axes = seen[0].axes
    tied, norms, cosine, unchanged, parts, distinct, table6 = axes[:7]
    assert len([line for line in tied.get_lines() if line.get_marker() == "o"]) == 2
    assert len(norms.get_lines()) == 4  # intended and realised per run
    for ax in (cosine, unchanged, distinct):
        assert len(ax.get_lines()) == 2
    assert len(parts.get_lines()) == 3  # sudoku: solved; countdown: correct, format
    assert len(table6.patches) == 3  # one run's three thresholds
    ledger = pq.read_table(tmp_path / "results/sudoku/h1/esopt/seed0/ledger.parquet")
    assert "realised_cosine" in ledger.column_names


def test_the_part_is_ready_for_the_report_registry(specs, tmp_path):
    """The entry the registry needs (esopt.report.registry): its build function writes
    every artifact, its inputs are the ES runs' ledgers and Table 6 records, and both
    caption files exist."""
    from pathlib import Path

    from esopt.report.diagnostics import build_part, part_inputs
    from esopt.report.registry import (
        PartJob,
        ReportContext,
        ReportPart,
        es_runs_with_updates,
        figure,
        table,
    )

    part = ReportPart(
        "diagnostics", "trained ES runs: ledgers and final/update_magnitudes.json",
        (table("diagnostics", "ES diagnostics per run", "ES diagnostics"),
         figure("diagnostics", "ES diagnostics per generation", "ES diagnostics",
                caption="diagnostics_fig")),
        runs=es_runs_with_updates, build=build_part,
        inputs=lambda ctx: part_inputs(es_runs_with_updates(ctx)))
    ctx = ReportContext(tuple(specs))
    assert part.is_active(ctx)
    assert sorted(part.input_files(ctx)) == sorted(
        f"results/{e}/h1/esopt/seed0/{f}" for e in ("sudoku", "countdown")
        for f in ("ledger.parquet", "final/update_magnitudes.json"))
    part.build(PartJob(part.runs(ctx), ctx, tmp_path / "tables", tmp_path / "figures"))
    for path in part.output_files(tmp_path / "tables", tmp_path / "figures"):
        assert Path(path).stat().st_size > 0, path
    for artifact in part.artifacts:
        assert (REPO / artifact.caption_file).is_file(), artifact.caption_file
