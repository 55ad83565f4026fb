import numpy as np
import pytest

from esopt.report.stats import (
    cell_matrix,
    cluster_bootstrap,
    mean_ci,
    paired_by_task,
    paired_difference,
    per_task,
)


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
    d = paired_by_task({0: ([1, 2, 1, 2], [1, 1, 1, 0])}, {0: ([2, 1], [0, 1])})
    assert d.mean == pytest.approx(0.25)  # task 1: 1 - 1, task 2: 0.5 - 0
    with pytest.raises(ValueError, match="different task sets"):
        paired_by_task({0: ([1, 2], [1, 1])}, {0: ([1, 3], [0, 1])})
    with pytest.raises(ValueError, match="different seeds"):
        paired_by_task({0: ([1], [1])}, {1: ([1], [0])})
    with pytest.raises(ValueError, match="seed 1 played other tasks"):
        cell_matrix({0: ([1, 2], [1, 0]), 1: ([1, 3], [1, 0])})
    with pytest.raises(ValueError, match="same tasks"):
        paired_difference([1, 0], [1])
    with pytest.raises(ValueError, match="non-empty"):
        mean_ci([])


def seeds_x_tasks(seed_offsets, n_tasks=32, seed=0):
    """(seeds, tasks) success rates: a task effect every seed shares (easy and hard
    boards), plus each seed's own offset (one trained model better than another)."""
    rng = np.random.default_rng(seed)
    task = rng.uniform(0.3, 0.7, n_tasks)  # offsets up to 0.2 stay inside [0, 1]
    return task[None, :] + np.asarray(seed_offsets)[:, None]


def test_cluster_interval_widens_with_between_seed_variance():
    """Acceptance (issue 36, item 5): the same 32 boards for 3 seeds; as the seeds spread
    apart the interval widens, far more than with the seeds pooled as 96 tasks (the old
    bootstrap, which sees the spread only as more task-to-task variance). Already without
    a spread the pooled one is narrower by ~sqrt(3): it counts every board three times."""
    widths, pooled = [], []
    for spread in (0.0, 0.05, 0.1, 0.2):
        x = seeds_x_tasks([-spread, 0.0, spread])
        ci = cluster_bootstrap(x)
        assert ci.mean == pytest.approx(x.mean()) and (ci.seeds, ci.n) == (3, 32)
        widths.append(ci.hi - ci.lo)
        pooled.append(mean_ci(x.reshape(-1)).hi - mean_ci(x.reshape(-1)).lo)
    ratios = [w / p for w, p in zip(widths, pooled, strict=True)]
    assert widths == sorted(widths) and widths[-1] > 4 * widths[0]
    assert ratios == sorted(ratios) and ratios[0] > 1.5 and ratios[-1] > 4


def test_pooled_repeats_and_seeds_make_the_interval_too_narrow():
    """3 seeds x 32 boards x 4 repeats: the old pooling (every episode a task) against
    the cells (repeats averaged within a (seed, task)): same mean, a wider interval."""
    rng = np.random.default_rng(3)
    p = seeds_x_tasks([-0.1, 0.0, 0.1])
    episodes = rng.random((3, 32, 4)) < p[:, :, None]
    old = mean_ci(episodes.reshape(-1).astype(float))
    new = cluster_bootstrap(episodes.mean(axis=2))
    assert new.mean == pytest.approx(old.mean)
    assert new.hi - new.lo > 1.5 * (old.hi - old.lo)


def test_one_seed_is_the_task_bootstrap_and_pairs_difference_cells():
    x = seeds_x_tasks([0.0])
    one = cluster_bootstrap(x)
    assert one.seeds == 1 and str(one) == str(mean_ci(x[0]))
    a, b = seeds_x_tasks([0.1, 0.0, 0.2]), seeds_x_tasks([0.0, 0.0, 0.0])
    d = paired_difference(a, b)
    assert d.mean == pytest.approx(0.1) and d.seeds == 3
    with pytest.raises(ValueError, match="missing or NaN"):
        cluster_bootstrap([[1.0, np.nan]])
