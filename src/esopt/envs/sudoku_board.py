"""Sudoku boards: seeded generation with a unique solution, solution counting, rendering,
and puzzle files (JSONL) checked line by line.

Boards are lists of rows; 0 marks an empty cell. Sizes 4 (2x2 boxes), 6 (2x3) and 9 (3x3).
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass, field, replace

from esopt.data.files import DataFileError, read_jsonl

Board = list[list[int]]

BOX_SHAPES = {4: (2, 2), 6: (2, 3), 9: (3, 3)}  # size -> (box rows, box cols)


def box_shape(size: int) -> tuple[int, int]:
    """(rows, cols) of a box of a size x size board."""
    try:
        return BOX_SHAPES[size]
    except KeyError:
        raise ValueError(f"sudoku size must be one of {sorted(BOX_SHAPES)}, got {size}") from None


def solved_grid(size: int, rng: random.Random) -> Board:
    """A uniformly shuffled valid solution grid: a pattern grid under random band/row/
    stack/column permutations and a digit relabelling."""
    br, bc = box_shape(size)
    bands = rng.sample(range(size // br), size // br)
    rows = [b * br + r for b in bands for r in rng.sample(range(br), br)]
    stacks = rng.sample(range(size // bc), size // bc)
    cols = [s * bc + c for s in stacks for c in rng.sample(range(bc), bc)]
    digits = rng.sample(range(1, size + 1), size)
    return [[digits[(bc * (r % br) + r // br + c) % size] for c in cols] for r in rows]


def _candidates(board: Board, r: int, c: int, size: int, br: int, bc: int) -> set[int]:
    used = set(board[r]) | {board[i][c] for i in range(size)}
    r0, c0 = r - r % br, c - c % bc
    used |= {board[i][j] for i in range(r0, r0 + br) for j in range(c0, c0 + bc)}
    return set(range(1, size + 1)) - used


def count_solutions(board: Board, limit: int = 2) -> int:
    """Number of completions of `board`, counting no further than `limit`."""
    size = len(board)
    br, bc = box_shape(size)
    work = [row[:] for row in board]

    def search() -> int:
        best = None
        for r in range(size):
            for c in range(size):
                if work[r][c] == 0:
                    cand = _candidates(work, r, c, size, br, bc)
                    if best is None or len(cand) < len(best[2]):
                        best = (r, c, cand)
                        if not cand:
                            return 0
        if best is None:
            return 1
        r, c, cand = best
        found = 0
        for v in sorted(cand):
            work[r][c] = v
            found += search()
            work[r][c] = 0
            if found >= limit:
                break
        return found

    return search()


def generate_puzzle(size: int, blanks: int, seed: int) -> tuple[Board, Board]:
    """(puzzle, solution): exactly `blanks` empty cells and a unique solution."""
    if not 1 <= blanks <= size * size:
        raise ValueError(f"blanks must be in [1, {size * size}], got {blanks}")
    rng = random.Random(seed)
    solution = solved_grid(size, rng)
    puzzle = [row[:] for row in solution]
    cells = [(r, c) for r in range(size) for c in range(size)]
    rng.shuffle(cells)
    removed = 0
    for r, c in cells:
        if removed == blanks:
            break
        puzzle[r][c] = 0
        if count_solutions(puzzle) == 1:
            removed += 1
        else:
            puzzle[r][c] = solution[r][c]
    if removed != blanks:
        raise ValueError(f"cannot blank {blanks} cells of a {size}x{size} board uniquely "
                         f"(seed {seed}); got {removed}")
    return puzzle, solution


def conflict(board: Board, r: int, c: int, v: int) -> str | None:
    """Why value v cannot go at (r, c) (0-indexed), or None if no rule forbids it."""
    size = len(board)
    br, bc = box_shape(size)
    if any(board[r][j] == v for j in range(size) if j != c):
        return f"{v} already appears in row {r + 1}"
    if any(board[i][c] == v for i in range(size) if i != r):
        return f"{v} already appears in column {c + 1}"
    r0, c0 = r - r % br, c - c % bc
    if any(board[i][j] == v for i in range(r0, r0 + br) for j in range(c0, c0 + bc)
           if (i, j) != (r, c)):
        return f"{v} already appears in its box"
    return None


def is_valid_solution(board: Board) -> bool:
    """Full and no rule broken."""
    size = len(board)
    return all(board[r][c] and conflict(board, r, c, board[r][c]) is None
               for r in range(size) for c in range(size))


def empty_cells(board: Board) -> list[tuple[int, int]]:
    """0-indexed (row, col) of every empty cell, row-major."""
    return [(r, c) for r, row in enumerate(board) for c, v in enumerate(row) if v == 0]


def render(board: Board) -> str:
    """The board with 1-indexed row/column labels, '.' for empty cells."""
    size = len(board)
    lines = ["col " + " ".join(str(c + 1) for c in range(size))]
    for r, row in enumerate(board):
        lines.append(f"r{r + 1}: " + " ".join(str(v) if v else "." for v in row))
    return "\n".join(lines)


@dataclass(frozen=True)
class Puzzle:
    """A board to solve and its (unique) solution; `blanks` is its H*. `line`: where a
    puzzle file holds it (0: generated)."""

    puzzle: Board
    solution: Board
    line: int = field(default=0, compare=False)

    @property
    def blanks(self) -> int:
        return len(empty_cells(self.puzzle))


def parse_grid(value, name: str) -> Board:
    """A board from a list of rows (0 = blank) or a compact row-major string ('.' or '0' =
    blank, whitespace ignored); the size must be one of BOX_SHAPES."""
    if isinstance(value, str):
        chars = [ch for ch in value if not ch.isspace()]
        size = math.isqrt(len(chars))
        if size * size != len(chars):
            raise ValueError(f"{name}: {len(chars)} cells is not a square board")
        bad = sorted({ch for ch in chars if ch != "." and not ch.isdigit()})
        if bad:
            raise ValueError(f"{name}: unexpected characters {bad} (digits, '.' or '0')")
        cells = [0 if ch == "." else int(ch) for ch in chars]
        board = [cells[r * size:(r + 1) * size] for r in range(size)]
    elif isinstance(value, list) and all(isinstance(row, list) for row in value):
        board = value
        if any(len(row) != len(board) for row in board):
            raise ValueError(f"{name}: rows of unequal length or not {len(board)} per row")
        if not all(isinstance(v, int) and not isinstance(v, bool) for row in board for v in row):
            raise ValueError(f"{name}: cells must be integers (0 = blank)")
    else:
        raise ValueError(f"{name}: expected a list of rows or a string, got "
                         f"{type(value).__name__}")
    size = len(board)
    if size not in BOX_SHAPES:
        raise ValueError(f"{name}: a {size}x{size} board; sizes are {sorted(BOX_SHAPES)}")
    if any(not 0 <= v <= size for row in board for v in row):
        raise ValueError(f"{name}: cell values must be 0..{size}")
    return [list(row) for row in board]


def check_puzzle(record: dict) -> Puzzle:
    """The puzzle of one file record, or ValueError saying what is wrong with it."""
    if not isinstance(record, dict) or "puzzle" not in record or "solution" not in record:
        raise ValueError("needs the fields 'puzzle' and 'solution'")
    puzzle = parse_grid(record["puzzle"], "puzzle")
    solution = parse_grid(record["solution"], "solution")
    if len(puzzle) != len(solution):
        raise ValueError(f"puzzle is {len(puzzle)}x{len(puzzle)} but solution is "
                         f"{len(solution)}x{len(solution)}")
    if not is_valid_solution(solution):
        raise ValueError("solution is not a complete valid grid")
    wrong = [(r + 1, c + 1) for r, row in enumerate(puzzle) for c, v in enumerate(row)
             if v and v != solution[r][c]]
    if wrong:
        raise ValueError(f"puzzle disagrees with its solution at r{wrong[0][0]}c{wrong[0][1]}")
    found = Puzzle(puzzle, solution)
    if found.blanks == 0:
        raise ValueError("puzzle has no blank cell")
    if "mask_count" in record and record["mask_count"] != found.blanks:
        raise ValueError(f"mask_count {record['mask_count']} but the puzzle has "
                         f"{found.blanks} blanks")
    if count_solutions(puzzle) != 1:
        raise ValueError("puzzle has more than one solution")
    return found


def load_puzzles(path: str | os.PathLike) -> list[Puzzle]:
    """Every puzzle of a JSONL file, in file order; a bad line raises ValueError naming it.

    Each line is an object with `puzzle` and `solution` (lists of rows with 0 for a blank,
    or compact strings with '.' or '0' for a blank) and an optional `mask_count` (the
    number of blanks, checked). Blank lines are skipped; all boards must have one size.
    """
    puzzles: list[Puzzle] = []
    for lineno, record in read_jsonl(path):  # undecodable lines raise naming their line
        try:
            found = check_puzzle(record)
            if puzzles and len(found.puzzle) != len(puzzles[0].puzzle):
                raise ValueError(f"a {len(found.puzzle)}x{len(found.puzzle)} board in a "
                                 f"file of {len(puzzles[0].puzzle)}x"
                                 f"{len(puzzles[0].puzzle)} boards")
        except ValueError as e:
            raise DataFileError.at(path, lineno, e) from None
        puzzles.append(replace(found, line=lineno))
    if not puzzles:
        raise DataFileError(f"{path}: no puzzles")
    return puzzles


def puzzle_record(puzzle: Board, solution: Board, compact: bool = False) -> dict:
    """One puzzle-file line (the format `load_puzzles` reads)."""
    if compact:
        flat = lambda b: "".join(str(v) if v else "." for row in b for v in row)  # noqa: E731
        return {"puzzle": flat(puzzle), "solution": flat(solution),
                "mask_count": len(empty_cells(puzzle))}
    return {"puzzle": puzzle, "solution": solution, "mask_count": len(empty_cells(puzzle))}


def write_puzzles(path: str | os.PathLike, size: int, blanks: int, count: int,
                  seed: int = 0, compact: bool = False) -> list[Puzzle]:
    """A puzzle file of `count` generated boards (seeds seed .. seed+count-1)."""
    puzzles = [Puzzle(*generate_puzzle(size, blanks, seed + i)) for i in range(count)]
    with open(path, "w") as f:
        for p in puzzles:
            f.write(json.dumps(puzzle_record(p.puzzle, p.solution, compact)) + "\n")
    return puzzles
