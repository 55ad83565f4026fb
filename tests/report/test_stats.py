import numpy as np
import pytest

from esopt.report.stats import mean_ci, paired_by_task, paired_difference, per_task


def test_mean_ci_width_matches_the_normal_approximation():
    rng = np.random.default_rng(1)
    x = (rng.random(400) < 0.3).astype(float)
    ci = mean_ci(x)
    se = x.std() / np.sqrt(x.size)
    assert ci.mean == pytest.approx(x.mean())
    assert ci.lo < ci.mean < ci.hi
    assert (ci.hi - ci.lo) == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_paired_difference_cancels_task_difficulty():
    # Easy tasks are solved by both, hard ones by neither; the treatment solves 12 more of
    # 128 and loses none. Unpaired intervals overlap; the paired one excludes zero.
    control = np.array([1.0] * 50 + [0.0] * 78)
    treatment = control.copy()
    treatment[50:62] = 1.0
    d = paired_difference(treatment, control)
    assert d.mean == pytest.approx(12 / 128)
    assert d.excludes_zero and d.lo > 0
    a, b = mean_ci(treatment), mean_ci(control)
    assert a.lo < b.hi  # unpaired: inside the noise


def test_paired_difference_of_a_tie_is_zero_and_of_noise_covers_zero():
    x = np.array([1.0, 0.0] * 64)
    assert str(paired_difference(x, x)) == "+0.000 [+0.000, +0.000]"
    rng = np.random.default_rng(0)
    a, b = (rng.random(128) < 0.4).astype(float), (rng.random(128) < 0.4).astype(float)
    assert not paired_difference(a, b).excludes_zero


def test_per_task_averages_repeats_and_pairing_refuses_other_tasks():
    assert per_task([3, 1, 3], [1.0, 0.0, 0.0]) == {3: 0.5, 1: 0.0}
    d = paired_by_task(([1, 2, 1, 2], [1, 1, 1, 0]), ([2, 1], [0, 1]))
    assert d.mean == pytest.approx(0.25)  # task 1: 1 - 1, task 2: 0.5 - 0
    with pytest.raises(ValueError, match="different task sets"):
        paired_by_task(([1, 2], [1, 1]), ([1, 3], [0, 1]))
    with pytest.raises(ValueError, match="same tasks"):
        paired_difference([1, 0], [1])
    with pytest.raises(ValueError, match="non-empty"):
        mean_ci([])
