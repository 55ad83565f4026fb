"""FLOP accounting and the per-step ledger."""

import pyarrow.parquet as pq
import pytest

from esopt.runtime.ledger import Ledger, LedgerRow, ModelShape, forward_flops, read_ledger


def test_forward_flops_counts_weights_and_attention():
    shape = ModelShape(n_params=1000, n_layers=2, d_model=8)
    # 3 tokens: weights 2 * 1000 * 3; attention 4 * 2 * 8 * (1 + 2 + 3)
    assert forward_flops(shape, 2, 1) == 6000 + 4 * 2 * 8 * 6
    assert forward_flops(shape, 3, 0) == forward_flops(shape, 0, 3)  # a cache changes nothing


def test_model_shape_of_a_real_model(tiny_policy):
    shape = ModelShape.of(tiny_policy.model)
    assert shape.n_params == tiny_policy.num_parameters
    assert shape.n_layers == tiny_policy.model.config.num_hidden_layers


def _row_columns(**over) -> dict:
    cols = {name: 0.0 for name in ("peak_memory_mb", "flops", "wall_s", "load_s", "generate_s",
                                    "score_s", "update_s", "noise_s", "save_s", "flops_generate",
                                    "flops_score", "flops_train", "reward_mean", "reward_std",
                                    "reward_min", "reward_max", "success", "turns")}
    cols.update(episodes=8, tokens=12, failed_episodes=0, excluded_directions=0)
    return {**cols, **over}


def test_ledger_rows_are_typed_and_round_trip(tmp_path):
    ledger = Ledger("run", "esopt")
    row = ledger.end_step(1, **_row_columns(generate_s=2.5, flops=1e9))
    assert isinstance(row, LedgerRow) and row.step == 1 and row.dispatched is None
    ledger.end_step(2, **_row_columns(dispatched=4, discarded=1, mean_lag=0.5))
    with pytest.raises(TypeError):  # a column the row does not have is refused
        ledger.end_step(3, **_row_columns(generation_s=1.0))
    path = ledger.write(tmp_path / "ledger.parquet", config_json="{}")
    t = read_ledger(path)
    assert t["step"] == [1, 2] and t["method"] == ["esopt", "esopt"]
    assert t["generate_s"] == [2.5, 0.0] and t["dispatched"] == [None, 4]
    assert pq.read_schema(path).metadata[b"esopt.record"] == b"ledger/2"
