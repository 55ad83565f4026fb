import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esopt.envs import make_env
from esopt.envs.actions import SudokuAction, parse_sudoku_action
from esopt.envs.sudoku_board import empty_cells


@pytest.mark.parametrize("blanks", [5, 10, 15])
def test_oracle_solves_every_puzzle_in_exactly_h_turns(blanks):
    env = make_env("sudoku", blanks=blanks, few_shot=0)
    for seed in range(200):
        env.reset(seed)
        for turn in range(1, blanks + 1):
            result = env.step(env.oracle_action())
            assert result.info["valid"]
            assert result.done == (turn == blanks)
        assert env.success and result.reward == 1.0 and env.turn == blanks


def test_random_agent_almost_never_solves():
    env = make_env("sudoku", blanks=5, few_shot=0)
    rng = random.Random(0)
    wins = 0
    for seed in range(200):
        env.reset(seed)
        done = False
        while not done:
            result = env.step(f"{rng.randint(1, 9)} {rng.randint(1, 9)} {rng.randint(1, 9)}")
            done = result.done
        wins += env.success
    assert wins <= 2


def test_budget_is_three_h_star_and_failure_is_zero_reward():
    env = make_env("sudoku", blanks=5, few_shot=0)
    env.reset(0)
    for turn in range(1, 16):
        result = env.step("nonsense")
        assert not result.info["parsed"]
        assert "Could not read" in result.observation[-2]["content"]
        assert "set <row> <col> <value>" in result.observation[-2]["content"]
        assert result.done == (turn == 15)
    assert result.reward == 0.0 and not env.success


def test_invalid_moves_cost_the_turn_with_feedback():
    env = make_env("sudoku", blanks=5, few_shot=0)
    env.reset(3)
    given = next((r, c) for r in range(9) for c in range(9) if env.board[r][c])
    result = env.step(f"{given[0] + 1} {given[1] + 1} 1")
    assert not result.info["valid"] and "given" in result.observation[-2]["content"]
    r, c = empty_cells(env.board)[0]
    clash = env.board[r][(c + 1) % 9] or env.board[r][(c + 2) % 9]
    result = env.step(f"{r + 1} {c + 1} {clash}")
    assert not result.info["valid"] and "row" in result.observation[-2]["content"]
    result = env.step("12 1 1")
    assert not result.info["valid"]
    assert env.turn == 3


def test_shaped_reward_counts_correct_cells():
    env = make_env("sudoku", blanks=5, few_shot=0, reward="cells", max_turns=2)
    env.reset(0)
    env.step(env.oracle_action())
    result = env.step(env.oracle_action())
    assert result.done and result.reward == pytest.approx(2 / 5)


def _dense_return(env, moves) -> float:
    total, result = 0.0, None
    for move in moves:
        result = env.step(move)
        total += result.reward
        if result.done:
            break
    assert result.done
    return total


@pytest.mark.parametrize("solve_turn, expected", [(1, 1.0), (2, 2 / 3), (3, 1 / 3)])
def test_dense_reward_at_h1_pays_an_earlier_solve_more(solve_turn, expected):
    """H*=1, 3 turns: the return is the fraction correct averaged over the turn budget."""
    env = make_env("sudoku", size=4, blanks=1, few_shot=0, reward="dense")
    env.reset(0)
    moves = ["nonsense"] * (solve_turn - 1) + [env.oracle_action()] + ["nonsense"] * 3
    assert _dense_return(env, moves) == pytest.approx(expected)
    assert env.success


def test_dense_reward_pays_partial_progress_from_the_move_that_made_it():
    env = make_env("sudoku", size=4, blanks=2, few_shot=0, reward="dense")  # 6 turns
    env.reset(1)
    first = env.step(env.oracle_action())
    assert not first.done and first.reward == pytest.approx(0.5 / 6)
    # Five misses: 1 correct cell of 2 on each of the 6 turns of the budget.
    assert first.reward + _dense_return(env, ["nonsense"] * 5) == pytest.approx(0.5)
    assert not env.success
    env.reset(1)
    assert _dense_return(env, ["nonsense"] * 6) == 0.0


def test_observation_shows_board_empties_and_prefill():
    env = make_env("sudoku", blanks=5, few_shot=2)
    obs = env.reset(0)
    assert obs[0]["role"] == "system" and "set <row> <col> <value>" in obs[0]["content"]
    assert len(obs) == 1 + 4 + 2
    assert "Empty cells: r" in obs[-2]["content"] and "col 1 2 3" in obs[-2]["content"]
    assert obs[-1] == {"role": "assistant", "content": "set "}
    assert obs[2]["content"].startswith("set ")


def test_cell_action_format():
    env = make_env("sudoku", size=4, blanks=2, few_shot=1, action_format="cell")
    obs = env.reset(0)
    assert obs[-1]["role"] == "user" and "r<row>c<col>=<value>" in obs[0]["content"]
    assert obs[2]["content"].startswith("r")
    env.step(env.oracle_action())
    assert env.step(env.oracle_action()).reward == 1.0
    with pytest.raises(ValueError, match="action_format"):
        make_env("sudoku", action_format="emoji")


def test_small_boards():
    env = make_env("sudoku", size=4, blanks=2, few_shot=1)
    env.reset(1)
    env.step(env.oracle_action())
    assert env.step(env.oracle_action()).reward == 1.0


def test_bad_options_fail_clearly():
    with pytest.raises(ValueError, match="unknown environment"):
        make_env("chess")
    with pytest.raises(ValueError, match="reward"):
        make_env("sudoku", reward="shaped")
    with pytest.raises(ValueError, match="bad options"):
        make_env("sudoku", colour="red")


@pytest.mark.parametrize("text, action", [
    ("set 3 4 5", SudokuAction(3, 4, 5)),
    ("set 3 4 5\nset 1 1 1", SudokuAction(3, 4, 5)),
    ("I will SET row 3, col 4 to 5.", SudokuAction(3, 4, 5)),
    ("set(3, 4, 5)", SudokuAction(3, 4, 5)),
    ("r3c4=5", SudokuAction(3, 4, 5)),
    ("Put R3 C4: 5", SudokuAction(3, 4, 5)),
    ('{"row": 3, "col": 4, "value": 5}', SudokuAction(3, 4, 5)),
    ('move: {"r": "3", "c": "4", "v": "5"}', SudokuAction(3, 4, 5)),
    ("3 4 5", SudokuAction(3, 4, 5)),
    ("set 10 4 5", SudokuAction(10, 4, 5)),  # parsed; the environment rejects the range
])
def test_parser_accepts_the_usual_forms(text, action):
    assert parse_sudoku_action(text) == action


@pytest.mark.parametrize("text", ["", "set", "set 3 4", "hello 3", '{"row": true}', "{}",
                                  "set a b c", "1234567 8 9"])
def test_parser_returns_none_on_non_actions(text):
    assert parse_sudoku_action(text) is None


@settings(max_examples=10_000, deadline=None)
@given(st.text())
def test_parser_never_raises_on_arbitrary_text(text):
    action = parse_sudoku_action(text)
    assert action is None or isinstance(action, SudokuAction)


@settings(max_examples=10_000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("set rowcl0123456789{}:,\"=\n ")), max_size=80))
def test_env_step_never_raises_on_action_like_text(text):
    env = make_env("sudoku", blanks=5, few_shot=0)
    env.reset(0)
    result = env.step(text)
    assert result.reward in (0.0, 1.0)
