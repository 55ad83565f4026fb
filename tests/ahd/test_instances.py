"""The benchmarks' instance files (`ahd.instances`) and the reference rows measured on them.

The files sit beside the repository (../shared/data/ahd; ESOPT_SHARED_DATA moves the data
root); tests that read them skip where they are absent."""

import os
from pathlib import Path

import numpy as np
import pytest

from esopt.ahd import instances, kp, tsp
from esopt.ahd.problems import PROBLEMS, evaluate
from esopt.pipeline.ahd import AHDConfigError, ahd_runs

DATA = Path(os.environ.get("ESOPT_SHARED_DATA",
                           Path(__file__).resolve().parents[3] / "shared" / "data")) / "ahd"
needs_files = pytest.mark.skipif(not DATA.exists(), reason=f"needs {DATA}")


@needs_files
@pytest.mark.parametrize("problem, split, shape", [
    ("tsp_constructive", "test20", (1000, 20, 2)), ("tsp_constructive", "test50", (1000, 50, 2)),
    ("kp_constructive", "test100", (1000, 100, 2)), ("tsp_aco", "test100", (64, 100, 2)),
    ("cvrp_aco", "test50", (64, 51, 3)), ("bpp_offline_aco", "test1000", (64, 1000)),
])
def test_files_load_by_split_read_only(problem, split, shape):
    data = PROBLEMS[problem].data(split, str(DATA))
    assert data.shape == shape and not data.flags.writeable


@needs_files
def test_kp_generator_equals_the_files_and_tsp_generator_does_not():
    np.testing.assert_array_equal(kp.instances("test50"),
                                  instances.load(DATA, "kp_constructive", "test50"))
    assert tsp.instances("test50").shape != instances.load(DATA, "tsp_constructive",
                                                           "test50").shape


# The paper's Table 5 rows, measured on the benchmark files.
@needs_files
@pytest.mark.parametrize("split, paper", [("test20", 4.4797), ("test50", 6.9590)])
def test_tsp_greedy_row_on_the_files_is_within_a_tenth_of_a_percent(split, paper):
    problem = PROBLEMS["tsp_constructive"]
    ev = evaluate(problem, problem.greedy_source, split, instances=str(DATA))
    assert ev.ok, ev.detail
    assert ev.objective == pytest.approx(paper, rel=1e-3)


@needs_files
@pytest.mark.parametrize("split, paper", [("test50", 20.037), ("test100", 40.271)])
def test_kp_optimum_row_on_the_files_to_three_decimals(split, paper):
    data = PROBLEMS["kp_constructive"].data(split, str(DATA))
    assert PROBLEMS["kp_constructive"].optimum(data) == pytest.approx(paper, abs=1.5e-3)


def test_missing_directory_is_a_config_error_and_missing_file_is_named(tmp_path):
    section = {"problems": ["tsp_aco"], "methods": ["eoh"], "seeds": [0]}
    with pytest.raises(AHDConfigError, match="ahd.instances"):
        ahd_runs({**section, "instances": str(tmp_path / "nowhere")}, "m")
    (run,) = ahd_runs({**section, "instances": str(tmp_path)}, "m")
    assert run.search_config().instances == str(tmp_path)
    with pytest.raises(instances.InstanceFileError, match="tsp_aco/train50_dataset.npy"):
        PROBLEMS["tsp_aco"].data("train", str(tmp_path))
    with pytest.raises(ValueError, match="no instance file"):
        instances.instance_path(tmp_path, "tsp_aco", "test7")


# Issue 35: instance files of the wrong shape or with NaN scored `nan` (or crashed inside a
# colony); they are refused when read, naming the file and what the problem needs.

def _npy(array):
    return lambda path: np.save(path, array)


def _with(array, index, value):
    array = np.array(array, dtype=np.float64)
    array[index] = value
    return array


def _bytes(raw):
    return lambda path: path.write_bytes(raw)


@pytest.mark.parametrize("problem, split, write, why", [
    ("tsp_constructive", "test20", _npy(_with(tsp.instances("test20"), (0, 3, 1), np.nan)),
     r"non-finite value nan at index \(0, 3, 1\)"),
    ("kp_constructive", "test50", _npy(_with(kp.instances("test50"), (9, 0, 0), np.inf)),
     r"non-finite value inf at index \(9, 0, 0\)"),
    ("tsp_constructive", "test20", _npy(np.zeros((4, 20, 3))),
     r"shape \(4, 20, 3\); tsp_constructive needs numbers of shape \(instances >= 1, 20, 2\)"),
    # N comes from the file's name: a TSP20 array in the TSP50 file is refused.
    ("tsp_aco", "test50", _npy(np.zeros((4, 20, 2))), r"shape \(4, 20, 2\)"),
    ("cvrp_aco", "test20", _npy(np.zeros((4, 20, 3))),
     r"needs numbers of shape \(instances >= 1, 21, 3\): per instance the depot and 20"),
    ("tsp_aco", "test20", _npy(np.zeros((0, 20, 2))), r"shape \(0, 20, 2\)"),
    ("tsp_aco", "test20", _npy(np.array([["a", "b"]] * 20)[None]), r"holds a <U1 array"),
    ("tsp_aco", "test20", _bytes(b"\x93NUMPY garbage"), "is not a readable numpy file"),
    ("bpp_offline_aco", "test500",
     lambda p: np.savez(p, demands=_with(np.full((2, 500), 50), (1, 7), np.nan)),
     r"non-finite value nan at index \(1, 7\)"),
    ("bpp_offline_aco", "test500", lambda p: np.savez(p, demands=np.full((2, 500), 50.5)),
     "item sizes must be integers"),
    ("bpp_offline_aco", "test500", lambda p: np.savez(p, sizes=np.full((2, 500), 50)),
     r"has no 'demands' array \(has \['sizes'\]\)"),
])
def test_a_bad_instance_file_is_refused_naming_it(tmp_path, problem, split, write, why):
    path = instances.instance_path(tmp_path, problem, split)
    path.parent.mkdir()
    write(path)
    with pytest.raises(instances.InstanceDataError, match=why) as err:
        PROBLEMS[problem].data(split, str(tmp_path))
    assert str(err.value).startswith(f"ahd.instances: {path}")


def test_a_nan_instance_is_refused_before_any_heuristic_is_scored_on_it(tmp_path):
    problem = PROBLEMS["tsp_constructive"]
    path = instances.instance_path(tmp_path, "tsp_constructive", "test20")
    path.parent.mkdir()
    np.save(path, _with(tsp.instances("test20"), (5, 0, 0), np.nan))
    with pytest.raises(instances.InstanceDataError, match="non-finite value nan"):
        evaluate(problem, problem.greedy_source, "test20", instances=str(tmp_path))
    np.save(path, tsp.instances("test20"))  # the same file without the NaN scores a number
    instances._load.cache_clear()
    ev = evaluate(problem, problem.greedy_source, "test20", instances=str(tmp_path))
    assert ev.ok and np.isfinite(ev.objective) and ev.objective > 0
