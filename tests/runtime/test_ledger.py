"""FLOP accounting and the per-step ledger."""

import pyarrow.parquet as pq

from esopt.runtime.ledger import Ledger, ModelShape, forward_flops


def test_forward_flops_counts_weights_and_attention():
    shape = ModelShape(n_params=1000, n_layers=2, d_model=8)
    # 3 tokens: weights 2 * 1000 * 3; attention 4 * 2 * 8 * (1 + 2 + 3)
    assert forward_flops(shape, 2, 1) == 6000 + 4 * 2 * 8 * 6
    assert forward_flops(shape, 3, 0) == forward_flops(shape, 0, 3)  # a cache changes nothing


def test_model_shape_of_a_real_model(tiny_policy):
    shape = ModelShape.of(tiny_policy.model)
    assert shape.n_params == tiny_policy.num_parameters
    assert shape.n_layers == tiny_policy.model.config.num_hidden_layers


def test_ledger_rows_carry_phase_times(tmp_path):
    ledger = Ledger("run", "esopt")
    with ledger.phase("generation"):
        pass
    with ledger.phase("generation"):
        pass
    with ledger.phase("update"):
        pass
    row = ledger.end_step(0, peak_memory_mb=100.0, flops=1e9, tokens=12)
    assert set(row) >= {"generation_s", "update_s", "flops", "peak_memory_mb", "tokens"}
    assert row["generation_s"] >= 0 and ledger.end_step(1, peak_memory_mb=1, flops=0)[
        "step"] == 1
    t = pq.read_table(ledger.write(tmp_path / "ledger.parquet"))
    assert t.num_rows == 2 and t.column("method").to_pylist() == ["esopt", "esopt"]
