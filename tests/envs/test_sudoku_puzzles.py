"""Sudoku puzzle files: loaded in file order, each line checked, solved by the oracle.

tests/data/sudoku9_h5.jsonl was written by the project's generator:
`esopt sudoku puzzles --blanks 5 --count 6 --seed 1000 --out ...` (rows of lists), then
the same with `--count 2 --seed 1006 --compact` appended (compact strings).
"""

import json
from pathlib import Path

import pytest

from esopt.envs import make_env
from esopt.envs.sudoku_board import generate_puzzle, load_puzzles, puzzle_record
from esopt.pipeline.stages import eval_tasks

FILE = Path(__file__).resolve().parents[1] / "data" / "sudoku9_h5.jsonl"


def test_a_puzzle_file_loads_in_file_order_in_both_formats():
    puzzles = load_puzzles(FILE)
    assert len(puzzles) == 8 and all(p.blanks == 5 and len(p.puzzle) == 9 for p in puzzles)
    lines = [json.loads(line) for line in FILE.read_text().splitlines()]
    assert isinstance(lines[0]["puzzle"], list) and isinstance(lines[7]["puzzle"], str)
    for i, seed in enumerate([*range(1000, 1006), 1006, 1007]):
        assert (puzzles[i].puzzle, puzzles[i].solution) == generate_puzzle(9, 5, seed)


def test_the_oracle_solves_every_puzzle_of_the_file_in_exactly_h_turns():
    env = make_env("sudoku", puzzles=str(FILE), blanks=5, few_shot=0)
    puzzles = load_puzzles(FILE)
    for i, expected in enumerate(puzzles):
        env.reset(i)
        assert env.board == expected.puzzle  # task i is line i
        for turn in range(1, 6):
            result = env.step(env.oracle_action())
            assert result.info["valid"] and result.done == (turn == 5)
        assert env.success and result.reward == 1.0 and env.turn == 5
        assert env.board == expected.solution


def test_evaluation_takes_the_file_in_order_each_once():
    options = {"puzzles": str(FILE), "blanks": 5}
    assert eval_tasks("sudoku", options, 32) == list(range(8))
    assert eval_tasks("sudoku", options, 3) == [0, 1, 2]
    assert eval_tasks("sudoku", {"blanks": 5}, 3) != [0, 1, 2]  # generated: hashed seeds


def _corrupt(tmp_path, line_no, record):
    lines = FILE.read_text().splitlines()
    lines[line_no - 1] = record if isinstance(record, str) else json.dumps(record)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _first():
    return json.loads(FILE.read_text().splitlines()[0])


def _two_solutions():
    # Two blank rows of one band: the grid with those rows swapped is a second solution.
    _, solution = generate_puzzle(9, 5, 1000)
    return puzzle_record([[0] * 9, [0] * 9, *solution[2:]], solution)


@pytest.mark.parametrize("line_no, make, why", [
    (3, lambda: "{not json", "line 3"),
    (2, lambda: {**_first(), "mask_count": 6}, "mask_count 6 but the puzzle has 5 blanks"),
    (4, lambda: {"puzzle": _first()["puzzle"]}, "needs the fields"),
    (5, lambda: {**_first(), "puzzle": [r[:8] for r in _first()["puzzle"]]}, "unequal length"),
    (6, lambda: {**_first(), "solution": [[1] * 9] * 9}, "not a complete valid grid"),
    (7, lambda: {**_first(), "puzzle": [[(v % 9) + 1 if v else 0 for v in r]
                                        for r in _first()["puzzle"]]}, "disagrees"),
    (8, _two_solutions, "more than one solution"),
    (2, lambda: puzzle_record(*generate_puzzle(4, 2, 0)), "a 4x4 board in a file of 9x9"),
])
def test_a_corrupted_line_is_refused_with_its_line_number(tmp_path, line_no, make, why):
    path = _corrupt(tmp_path, line_no, make())
    with pytest.raises(ValueError) as err:
        load_puzzles(path)
    assert f"line {line_no}:" in str(err.value) and why in str(err.value)


@pytest.mark.parametrize("line_no, raw, why", [
    # Issue 35: these raised a bare RecursionError / UnicodeDecodeError, naming no file.
    (3, b"[" * 100_000, "JSON nested too deeply to read"),
    (4, '{"puzzle": "caf\u00e9"}'.encode("latin-1"), "not UTF-8 text (byte 0xe9 at column 16)"),
    (5, b'{"puzzle": [[1, 2]],\t"solution" 3}', "not JSON: Expecting ':' delimiter at column 33"),
    (2, b"[1, 2]", "needs the fields 'puzzle' and 'solution'"),
])
def test_an_unreadable_line_is_refused_naming_the_file_and_line(tmp_path, line_no, raw, why):
    lines = FILE.read_bytes().splitlines()
    lines[line_no - 1] = raw
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ValueError) as err:
        load_puzzles(path)
    assert str(err.value) == f"{path}, line {line_no}: {why}"


def test_lines_are_counted_in_the_file_blank_ones_included(tmp_path):
    lines = FILE.read_text().splitlines()
    path = tmp_path / "gaps.jsonl"
    path.write_text("\n".join(["", lines[0], "", "  ", lines[1]]) + "\n")
    assert [p.line for p in load_puzzles(path)] == [2, 5]
    with pytest.raises(ValueError, match=r"gaps.jsonl, line 2: 5 blanks, but blanks \(H\*\) is"):
        make_env("sudoku", puzzles=str(path), blanks=4)
    path.write_text("\n".join(["", lines[0], "", "{"]) + "\n")
    with pytest.raises(ValueError, match=r"gaps.jsonl, line 4: not JSON"):
        load_puzzles(path)


def test_the_env_refuses_a_file_of_another_horizon_or_size():
    with pytest.raises(ValueError, match=r"sudoku9_h5.jsonl, line 1: 5 blanks, but blanks"):
        make_env("sudoku", puzzles=str(FILE), blanks=10)
    with pytest.raises(ValueError, match="9x9 boards, but size is 4"):
        make_env("sudoku", puzzles=str(FILE), size=4)
    env = make_env("sudoku", puzzles=str(FILE), few_shot=0)  # H* from the file
    env.reset(0)
    assert env.blanks == 5 and env.max_turns == 15
