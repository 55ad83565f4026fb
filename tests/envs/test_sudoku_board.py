import itertools
import random

import pytest

from esopt.envs.sudoku_board import (
    conflict,
    count_solutions,
    empty_cells,
    generate_puzzle,
    is_valid_solution,
    render,
    solved_grid,
)


@pytest.mark.parametrize("size", [4, 6, 9])
def test_solved_grids_are_valid(size):
    for seed in range(50):
        assert is_valid_solution(solved_grid(size, random.Random(seed)))


def test_solved_grids_vary_with_the_seed():
    grids = {str(solved_grid(9, random.Random(s))) for s in range(20)}
    assert len(grids) == 20


@pytest.mark.parametrize("blanks", [5, 10, 15])
def test_1000_puzzles_have_exactly_h_blanks_and_one_solution(blanks):
    for seed in range(1000):
        puzzle, solution = generate_puzzle(9, blanks, seed)
        assert len(empty_cells(puzzle)) == blanks
        assert count_solutions(puzzle) == 1
        assert is_valid_solution(solution)
        assert all(p in (0, s) for pr, sr in zip(puzzle, solution, strict=True)
                   for p, s in zip(pr, sr, strict=True))


def _brute_force_count(board):
    """Every assignment of the empty cells, checked by the rules (small boards only)."""
    cells = empty_cells(board)
    n = len(board)
    count = 0
    for values in itertools.product(range(1, n + 1), repeat=len(cells)):
        trial = [row[:] for row in board]
        for (r, c), v in zip(cells, values, strict=True):
            trial[r][c] = v
        count += is_valid_solution(trial)
    return count


def test_solution_counter_agrees_with_brute_force():
    rng = random.Random(0)
    for _ in range(30):
        board = solved_grid(4, rng)
        for r, c in rng.sample([(r, c) for r in range(4) for c in range(4)], 7):
            board[r][c] = 0
        assert count_solutions(board, limit=10**6) == _brute_force_count(board)


def test_generation_is_deterministic():
    assert generate_puzzle(9, 10, 42) == generate_puzzle(9, 10, 42)
    assert generate_puzzle(9, 10, 42) != generate_puzzle(9, 10, 43)


def test_conflict_names_the_rule():
    board = [[0, 0, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]
    assert conflict(board, 0, 1, 4) == "4 already appears in row 1"
    assert conflict(board, 0, 1, 1) == "1 already appears in column 2"
    assert conflict(board, 0, 1, 2) is None
    board = [[0, 0, 3, 4], [1, 2, 0, 0], [3, 0, 0, 0], [4, 0, 0, 0]]
    assert conflict(board, 0, 0, 2) == "2 already appears in its box"


def test_render_labels_rows_and_columns():
    text = render([[1, 0, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]])
    assert text.splitlines()[0] == "col 1 2 3 4"
    assert text.splitlines()[1] == "r1: 1 . 3 4"


@pytest.mark.parametrize("kwargs", [dict(size=5, blanks=1), dict(size=4, blanks=0),
                                    dict(size=4, blanks=17)])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        generate_puzzle(seed=0, **kwargs)
