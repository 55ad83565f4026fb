"""Sudoku boards: seeded generation with a unique solution, solution counting, rendering.

Boards are lists of rows; 0 marks an empty cell. Sizes 4 (2x2 boxes), 6 (2x3) and 9 (3x3).
"""

from __future__ import annotations

import random

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
