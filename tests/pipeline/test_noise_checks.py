"""The update refuses noise it cannot reproduce: a direction file scored with another
noise, or an ES lineage drawn under an older noise spec."""

import json

import pytest

from esopt.es.noise import NOISE_SPEC
from esopt.pipeline.stages import update_checkpoint
from esopt.runtime.checkpoint import MANIFEST_NAME, check_noise_lineage, read_master
from tests.pipeline.test_update_stage import _rewards, _spec


def test_update_refuses_a_direction_with_a_foreign_fingerprint(tiny_dir, tmp_path):
    spec = _spec(tiny_dir)
    good = _rewards(spec, tmp_path / "good.parquet", [0.0, 1.0, 0.5, 0.25])
    update_checkpoint(spec, 0, str(tiny_dir), good, str(tmp_path / "ok"))  # accepted
    import pyarrow.parquet as pq

    fps = pq.read_table(good).column("noise_fingerprint").to_pylist()
    fps[2] = "0123456789abcdef"  # scored on a machine whose generator drew other bits
    bad = _rewards(spec, tmp_path / "bad.parquet", [0.0, 1.0, 0.5, 0.25], fps)
    with pytest.raises(ValueError, match="direction 2 was scored with noise fingerprint "
                                         "0123456789abcdef"):
        update_checkpoint(spec, 0, str(tiny_dir), bad, str(tmp_path / "refused"))
    assert not (tmp_path / "refused").exists()


def test_an_es_lineage_of_an_older_noise_spec_is_refused(tiny_dir, tmp_path):
    spec = _spec(tiny_dir)
    rewards = _rewards(spec, tmp_path / "r.parquet", [0.0, 1.0, 0.5, 0.25])
    child = tmp_path / "gen001"
    manifest = update_checkpoint(spec, 0, str(tiny_dir), rewards, str(child))
    assert manifest.noise_spec == NOISE_SPEC
    check_noise_lineage(child)  # today's spec: fine
    check_noise_lineage(tiny_dir)  # a base model has no ES lineage: fine
    old = json.loads((child / MANIFEST_NAME).read_text())
    del old["noise_spec"]  # what checkpoints made before spec 2 look like
    (child / MANIFEST_NAME).write_text(json.dumps(old))
    with pytest.raises(ValueError, match="esopt-noise/1.*Rerun the run from its base model"):
        check_noise_lineage(child)
    assert read_master(child)  # the weights themselves are intact
