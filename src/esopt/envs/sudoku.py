"""Agentic Sudoku: one cell per turn, binary terminal success (the paper's Table 1 task).

A board has exactly H* blanks (the minimum successful horizon) and a unique solution; the
agent writes `set <row> <col> <value>` (1-indexed) each turn, within a budget of 3*H*
turns. Moves that break a rule, touch a given cell or cannot be parsed cost the turn and
are answered with feedback; a rule-abiding but wrong value is placed (the agent may
overwrite its own cells later). The observation is the current board, the list of empty
cells and the last feedback (state only, no history: prompts stay short).

Boards are generated from the task seed, or read from a puzzle file (`puzzles: path.jsonl`,
see `sudoku_board.load_puzzles`): then task i is line i (mod the file's length) and H* is
each board's own number of blanks.
"""

from __future__ import annotations

from esopt.chat import Conversation
from esopt.envs.actions import parse_sudoku_action
from esopt.envs.base import REWARD_COMPONENTS, Environment, StepResult, register
from esopt.envs.sudoku_board import (
    box_shape,
    conflict,
    empty_cells,
    generate_puzzle,
    is_valid_solution,
    load_puzzles,
    render,
)

# binary: 1 when solved (the paper). cells: correct cells / H* at the end. dense: every
# turn of the budget pays the fraction of cells correct after it, so the return is that
# fraction averaged over the turn budget (turns after the end count as the last board):
# solving at turn k of T pays (T - k + 1) / T, partial progress pays from the move that
# made it. At H*=1 binary and cells give 0 or 1; dense tells a first-turn solve from a
# third-turn one, a signal ES can rank directions by (issue 37 item 4).
REWARDS = ("binary", "cells", "dense")

# How the agent is asked to write its move; the parser accepts both (and JSON) either way.
# "verb" is the paper's wording. "cell" copies the cell names of the empty-cell list:
# measured on SmolLM2-135M, 4x4 boards, 1 few-shot example, greedy, 32 boards: the
# move named an empty cell 100% of the time with "cell" and 3% with "verb".
ACTION_FORMATS = {
    "verb": ("set <row> <col> <value>", "set {r} {c} {v}", "set "),
    "cell": ("r<row>c<col>=<value>", "r{r}c{c}={v}", ""),
}

SYSTEM = (
    "You are playing Sudoku on a {n}x{n} board with {br}x{bc} boxes. Each row, each "
    "column and each box must contain the digits 1 to {n} exactly once. Fill one empty "
    "cell per turn by answering with one line: {syntax}"
)


def _observation_text(board, feedback: str | None) -> str:
    empties = ", ".join(f"r{r + 1}c{c + 1}" for r, c in empty_cells(board))
    text = f"Board:\n{render(board)}\nEmpty cells: {empties}"
    if feedback:
        text = f"{feedback}\n{text}"
    return text + "\nYour move?"


def _easiest_move(board) -> tuple[int, int, int]:
    """A forced move: the empty cell with the fewest candidates (for few-shot examples)."""
    size = len(board)
    best = None
    for r, c in empty_cells(board):
        cands = [v for v in range(1, size + 1) if conflict(board, r, c, v) is None]
        if best is None or len(cands) < len(best[2]):
            best = (r, c, cands)
    r, c, cands = best
    return r, c, cands[0]


@register("sudoku")
class SudokuEnv(Environment):
    """Sudoku with `blanks` (= H*) empty cells; options size, max_turns (default 3*H*),
    reward (binary|cells|dense: REWARDS), few_shot (example turns), action_format, puzzles
    (a JSONL puzzle file instead of generated boards; with `blanks` set, every board of
    the file must have that many blanks, and its size must be `size`)."""

    max_new_tokens = 8
    stop = ("\n",)

    def __init__(self, blanks: int | None = None, size: int = 9, max_turns: int | None = None,
                 reward: str = "binary", few_shot: int = 1, action_format: str = "verb",
                 puzzles: str | None = None):
        self.puzzles = load_puzzles(puzzles) if puzzles is not None else None
        # A puzzle file is a fixed task list: evaluation takes its boards in file order.
        self.indexed_tasks = self.puzzles is not None
        if self.puzzles is not None:
            self._check_file(puzzles, blanks, size)
            blanks = self.puzzles[0].blanks if blanks is None else blanks
        elif blanks is None:
            blanks = 5
        box_shape(size)
        if action_format not in ACTION_FORMATS:
            raise ValueError(f"action_format must be one of {sorted(ACTION_FORMATS)}, "
                             f"got {action_format!r}")
        self.syntax, self.answer_template, self.prefill = ACTION_FORMATS[action_format]
        if not 1 <= blanks <= size * size:
            raise ValueError(f"blanks must be in [1, {size * size}], got {blanks}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        self.size, self.blanks, self.reward_kind = size, blanks, reward
        self._max_turns_option = max_turns
        self.max_turns = 3 * blanks if max_turns is None else max_turns
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        self.few_shot = few_shot
        self._examples = self._few_shot_messages(few_shot)
        self.board = self.solution = self.givens = None
        self.turn = 0
        self.feedback: str | None = None

    def _few_shot_messages(self, k: int) -> Conversation:
        msgs: Conversation = []
        for i in range(k):
            # Fixed example boards from a seed range no task uses (negative seeds).
            puzzle, _ = generate_puzzle(self.size, min(self.blanks, 3 + i), seed=-1 - i)
            r, c, v = _easiest_move(puzzle)
            msgs.append({"role": "user", "content": _observation_text(puzzle, None)})
            msgs.append({"role": "assistant",
                         "content": self.answer_template.format(r=r + 1, c=c + 1, v=v)})
        return msgs

    def _check_file(self, path: str, blanks: int | None, size: int) -> None:
        for p in self.puzzles:
            if len(p.puzzle) != size:
                raise ValueError(f"{path}, line {p.line}: {len(p.puzzle)}x{len(p.puzzle)} "
                                 f"boards, but size is {size}")
            if blanks is not None and p.blanks != blanks:
                raise ValueError(f"{path}, line {p.line}: {p.blanks} blanks, but blanks "
                                 f"(H*) is {blanks}")

    @property
    def num_tasks(self) -> int | None:
        """Boards of the puzzle file (None: generated boards, unbounded)."""
        return None if self.puzzles is None else len(self.puzzles)

    def reset(self, seed: int) -> Conversation:
        if self.puzzles is None:
            puzzle, self.solution = generate_puzzle(self.size, self.blanks, seed)
        else:
            entry = self.puzzles[seed % len(self.puzzles)]
            puzzle, self.solution = entry.puzzle, entry.solution
            self.blanks = entry.blanks  # H* of this board
            if self._max_turns_option is None:
                self.max_turns = 3 * self.blanks
        self.board = [row[:] for row in puzzle]
        self.givens = {(r, c) for r in range(self.size) for c in range(self.size) if puzzle[r][c]}
        self.turn = 0
        self.feedback = None
        return self.observation()

    def observation(self) -> Conversation:
        br, bc = box_shape(self.size)
        conv = [
            {"role": "system", "content": SYSTEM.format(n=self.size, br=br, bc=bc,
                                                        syntax=self.syntax)},
            *self._examples,
            {"role": "user", "content": _observation_text(self.board, self.feedback)},
        ]
        if self.prefill:
            conv.append({"role": "assistant", "content": self.prefill})
        return conv

    @property
    def success(self) -> bool:
        return self.board is not None and is_valid_solution(self.board)

    def cells_correct(self) -> int:
        return sum(self.board[r][c] == self.solution[r][c]
                   for r in range(self.size) for c in range(self.size)
                   if (r, c) not in self.givens)

    def step(self, completion: str) -> StepResult:
        if self.board is None:
            raise RuntimeError("step() before reset()")
        self.turn += 1
        text = self.prefill + completion
        action = parse_sudoku_action(text)
        info = {"action": text, "parsed": action is not None, "valid": False}
        if action is None:
            self.feedback = f"Could not read a move. Answer with: {self.syntax}"
        else:
            self.feedback = self._apply(action.row - 1, action.col - 1, action.value)
            info["valid"] = self.feedback.startswith("OK")
        solved = self.success
        done = solved or self.turn >= self.max_turns
        info["cells_correct"] = self.cells_correct()
        fraction = info["cells_correct"] / self.blanks
        if self.reward_kind == "dense":
            # This turn's share, and at the end the turns left over, each at this board.
            turns_paid = 1 + (self.max_turns - self.turn if done else 0)
            reward = fraction * turns_paid / self.max_turns
        elif not done:
            reward = 0.0
        elif self.reward_kind == "binary":
            reward = float(solved)
        else:
            reward = fraction
        # One part: the board (no format reward; `parsed` and `valid` say how moves read).
        info[REWARD_COMPONENTS] = {"solved" if self.reward_kind == "binary" else "cells":
                                   reward}
        return StepResult(self.observation(), reward, done, info)

    def _apply(self, r: int, c: int, v: int) -> str:
        n = self.size
        if not (0 <= r < n and 0 <= c < n):
            return f"Invalid: row and column must be between 1 and {n}."
        if not 1 <= v <= n:
            return f"Invalid: the value must be between 1 and {n}."
        if (r, c) in self.givens:
            return f"Invalid: r{r + 1}c{c + 1} is a given cell."
        why = conflict(self.board, r, c, v)
        if why is not None:
            return f"Invalid: {why}."
        self.board[r][c] = v
        return f"OK: r{r + 1}c{c + 1} = {v}."

    def oracle_action(self) -> str:
        """A correct move as the policy would write it after the prefill (for tests)."""
        r, c = empty_cells(self.board)[0]
        move = self.answer_template.format(r=r + 1, c=c + 1, v=self.solution[r][c])
        return move[len(self.prefill):]
