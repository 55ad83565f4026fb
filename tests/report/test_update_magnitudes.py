"""Table 6: fractions of parameters under update-magnitude thresholds, exact and streamed."""

import json

import pytest
import torch

from esopt.report import update_magnitudes as um
from esopt.runtime.checkpoint import read_master, write_checkpoint


def test_counts_include_the_threshold_and_cover_every_tensor():
    base = [torch.zeros(4), torch.ones(2, 3)]
    final = [torch.tensor([0.0, 1e-3, -2e-3, 5e-3]), torch.ones(2, 3) + 1.5e-3]
    # float32 rounding of 1e-3 etc. is the same on both sides: use the stored values.
    t = [float(torch.tensor(1e-3)), float(torch.tensor(1.5e-3) + 1) - 1]
    rec = um.update_magnitudes(zip(base, final, strict=True), t)
    assert rec["parameters"] == 10
    # |Δ| = 0, 1e-3, 2e-3, 5e-3 and six of ~1.5e-3 (float32 spacing near 1)
    assert rec["counts"][0] == 2
    assert rec["counts"][1] == 8
    assert rec["max_abs"] == pytest.approx(5e-3, rel=1e-6)
    assert rec["fractions"] == [c / 10 for c in rec["counts"]]


def test_slicing_a_tensor_does_not_change_the_result(monkeypatch):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(1000, 37, generator=g)
    final = base + 1e-3 * torch.randn(1000, 37, generator=g)
    thresholds = [5e-4, 1e-3, 2e-3]
    whole = um.update_magnitudes([(base, final)], thresholds)
    monkeypatch.setattr(um, "CHUNK", 999)  # 38 slices, the last one short
    sliced = um.update_magnitudes([(base, final)], thresholds)
    assert sliced["counts"] == whole["counts"]
    assert sliced["max_abs"] == whole["max_abs"]
    assert sliced["mean_abs"] == pytest.approx(whole["mean_abs"], rel=1e-12)
    # Gaussian |Δ|/1e-3 <= 1 for ~68.3% of entries
    assert whole["fractions"][1] == pytest.approx(0.683, abs=0.01)


def test_bad_thresholds_and_empty_inputs_fail():
    with pytest.raises(ValueError, match="> 0"):
        um.update_magnitudes([(torch.zeros(2), torch.zeros(2))], [0.0])
    with pytest.raises(ValueError, match="no parameters"):
        um.update_magnitudes([], [1e-3])


def test_stage_reads_two_checkpoints_and_records_the_spec(tiny_dir, tmp_path):
    from tests.conftest import smoke_run_spec

    spec = smoke_run_spec(tiny_dir, {})
    sigma = spec.es.sigma.sigma_0
    master = read_master(tiny_dir)
    moved = {n: t.clone() for n, t in master.items()}
    name = sorted(moved)[0]
    moved[name].view(-1)[:10] += 2 * sigma  # 10 parameters beyond 4/3 sigma_0
    final = tmp_path / "final"
    write_checkpoint(final, moved, files_from=tiny_dir)
    out = tmp_path / "m.json"
    rec = um.magnitudes_stage(spec, tiny_dir, final, out)
    n = sum(t.numel() for t in master.values())
    assert rec["parameters"] == n
    assert rec["counts"] == [n - 10] * 3
    assert json.loads(out.read_text())["spec"]["method"] == "esopt"
    header, rows = um.table6([rec])
    assert rows[0][2] == "Agentic ESOpt" and rows[0][6] == f"{100 * (n - 10) / n:.2f}%"
    assert rows[-1][6:9] == ["83.68%", "96.26%", "99.42%"]


def test_checkpoints_of_different_models_are_refused(tiny_dir, tmp_path):
    master = read_master(tiny_dir)
    fewer = dict(list(master.items())[1:])
    other = tmp_path / "other"
    write_checkpoint(other, fewer, files_from=tiny_dir)
    with pytest.raises(ValueError, match="different tensors"):
        list(um.checkpoint_pairs(tiny_dir, other))
