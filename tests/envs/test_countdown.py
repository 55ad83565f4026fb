from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esopt.envs import make_env
from esopt.envs.arithmetic import ExpressionError, evaluate
from esopt.envs.countdown import _solve, generate_task, score_answer


def test_tasks_are_solvable_and_deterministic():
    for seed in range(200):
        numbers, target = generate_task(seed, 3, 10)
        assert generate_task(seed, 3, 10) == (numbers, target)
        value, literals = evaluate(_solve(numbers, target))
        assert value == target and sorted(literals) == sorted(numbers)


@pytest.mark.parametrize("expr, value", [("1 + 2 * 3", 7), ("(1 + 2) * 3", 9),
                                         ("7 / 2", Fraction(7, 2)), ("10 - 4 - 3", 3)])
def test_evaluate_is_exact_arithmetic(expr, value):
    assert evaluate(expr)[0] == value


@pytest.mark.parametrize("expr", ["__import__('os')", "2 ** 100000", "1 / 0", "x + 1", "",
                                  "1 +", "9" * 300, "(" * 150 + "1" + ")" * 150, "-1 + 2",
                                  "1.5 + 2", "1 if 1 else 2", "[1]"])
def test_evaluate_rejects_everything_else(expr):
    with pytest.raises(ExpressionError):
        evaluate(expr)


@settings(max_examples=10_000, deadline=None)
@given(st.text(max_size=120))
def test_evaluate_fails_only_with_expression_error(text):
    try:
        evaluate(text)
    except ExpressionError:
        pass


@settings(max_examples=10_000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789+-*/() <answer/>")), max_size=80))
def test_scoring_never_raises(text):
    reward, _ = score_answer(text, [1, 2, 3], 6)
    assert reward in (0.0, 0.1, 1.1)


def test_rewards_format_and_correctness():
    numbers, target = [3, 5, 2], 16
    assert score_answer("<answer>(3 + 5) * 2</answer>", numbers, target)[0] == pytest.approx(1.1)
    assert score_answer("<answer>3 + 5 + 2</answer>", numbers, target)[0] == pytest.approx(0.1)
    assert score_answer("<answer>(3 + 5) * 2 * 1</answer>", numbers, target)[0] == 0.1
    assert score_answer("(3 + 5) * 2", numbers, target)[0] == 0.0
    assert score_answer("<answer>3 +</answer>", numbers, target)[0] == 0.0


def test_env_prefills_and_closes_the_answer_tag():
    env = make_env("countdown", few_shot=3)
    obs = env.reset(5)
    assert obs[-1] == {"role": "assistant", "content": "<answer>"}
    assert len(obs) == 1 + 6 + 2
    result = env.step(_solve(env.numbers, env.target))
    assert result.done and env.success and result.reward == pytest.approx(1.1)


def test_an_int_count_keeps_the_tasks_of_earlier_runs():
    # Pinned before count ranges existed: an int count must draw nothing extra.
    assert generate_task(0, 3, 10) == ([7, 7, 1], 49)
    assert generate_task(1, 2, 10) == ([3, 10], 30)


def test_a_count_range_draws_each_tasks_count_from_it():
    from esopt.envs.countdown import CountdownEnv
    env = CountdownEnv(count=[3, 4], max_number=100, few_shot=3)
    counts = []
    for seed in range(200):
        env.reset(seed)
        counts.append(len(env.numbers))
        assert all(1 <= n <= 100 for n in env.numbers)
        assert generate_task(seed, (3, 4), 100) == (env.numbers, env.target)
    assert set(counts) == {3, 4}
    assert 60 <= counts.count(3) <= 140  # uniform over 3..4


@pytest.mark.parametrize("count", [1, [1, 3], [4, 3], [3], [3, 4, 5], "3", [3.0, 4], True])
def test_a_bad_count_is_refused(count):
    from esopt.envs.countdown import CountdownEnv
    with pytest.raises(ValueError, match="count"):
        CountdownEnv(count=count)
