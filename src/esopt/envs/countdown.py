"""Countdown (the task of Qiu et al., ES at scale): reach a target with the given numbers.

Single turn. The policy answers `<answer>expr</answer>` using every given number exactly
once with + - * / and parentheses. Reward: 0.1 for a well-formed answer plus 1.0 if it
is also correct (so 1.1 for a correct answer); success means correct.
"""

from __future__ import annotations

import random
import re
from fractions import Fraction

from esopt.chat import Conversation
from esopt.envs.arithmetic import ExpressionError, evaluate
from esopt.envs.base import REWARD_COMPONENTS, Environment, StepResult, register

FORMAT_REWARD = 0.1
CORRECT_REWARD = 1.0
PREFILL = "<answer>"
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)

SYSTEM = ("Combine the given numbers with + - * / and parentheses, using each number "
          "exactly once, to reach the target. Answer as <answer>expression</answer>.")


def generate_task(seed: int, count: int | tuple[int, int] = 3, max_number: int = 10
                  ) -> tuple[list[int], int]:
    """(numbers, target) with a known solution: a random expression over the numbers.

    `count` (lo, hi) draws each task's count uniformly from lo..hi first (ES at scale's
    tasks have 3 or 4 numbers); an int count draws nothing for it, so its tasks stay those
    of every earlier run."""
    rng = random.Random(seed)
    if not isinstance(count, int):
        count = rng.randint(*count)
    while True:
        numbers = [rng.randint(1, max_number) for _ in range(count)]
        values = [Fraction(n) for n in numbers]
        rng.shuffle(values)
        while len(values) > 1:
            a, b = values.pop(), values.pop()
            op = rng.choice("+-*/")
            if op == "/" and (b == 0 or (a / b).denominator != 1):
                op = "+"
            values.append({"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else a}[op])
        target = values[0]
        if target.denominator == 1 and 1 <= target <= 1000:
            return numbers, int(target)


def _check_count(count) -> int | tuple[int, int]:
    """An int >= 2, or a [lo, hi] range with 2 <= lo <= hi (as a tuple)."""
    if isinstance(count, bool) or not isinstance(count, (int, list, tuple)):
        raise ValueError(f"count must be an int or [lo, hi], got {count!r}")
    if isinstance(count, int):
        if count < 2:
            raise ValueError(f"count must be >= 2, got {count}")
        return count
    if (len(count) != 2 or not all(isinstance(c, int) and not isinstance(c, bool)
                                   for c in count) or not 2 <= count[0] <= count[1]):
        raise ValueError(f"count as a range must be [lo, hi] with 2 <= lo <= hi, got {count!r}")
    return tuple(count)


def _prompt(numbers: list[int], target: int) -> str:
    return f"Numbers: {', '.join(map(str, numbers))}. Target: {target}."


def score_answer(text: str, numbers: list[int], target: int) -> tuple[float, dict]:
    """Reward and info for a full answer text (containing <answer>...</answer>)."""
    m = _ANSWER.search(text or "")
    info = {"expression": None, "formatted": False, "correct": False, "error": None}
    if not m:
        info["error"] = "no <answer>...</answer>"
        return 0.0, info
    expr = m.group(1).strip()
    info["expression"] = expr
    try:
        value, literals = evaluate(expr)
    except ExpressionError as e:
        info["error"] = str(e)
        return 0.0, info
    info["formatted"] = True
    if sorted(literals) != sorted(numbers):
        info["error"] = "must use each given number exactly once"
    elif value != target:
        info["error"] = f"value {value} != target {target}"
    else:
        info["correct"] = True
    return FORMAT_REWARD + (CORRECT_REWARD if info["correct"] else 0.0), info


@register("countdown")
class CountdownEnv(Environment):
    """One Countdown task per episode; options count (an int, or [lo, hi]: each task's
    count drawn from lo..hi), max_number, few_shot."""

    max_turns = 1
    max_new_tokens = 24
    stop = ("</answer>",)

    def __init__(self, count: int | list[int] = 3, max_number: int = 10, few_shot: int = 3):
        count = _check_count(count)
        if max_number < 1:
            raise ValueError(f"max_number must be >= 1, got {max_number}")
        self.count, self.max_number = count, max_number
        self._examples: Conversation = []
        for i in range(few_shot):
            numbers, target = generate_task(-1 - i, count, max_number)
            self._examples += [{"role": "user", "content": _prompt(numbers, target)},
                               {"role": "assistant",
                                "content": f"<answer>{_solve(numbers, target)}</answer>"}]
        self.numbers: list[int] = []
        self.target = 0
        self._correct = False

    def reset(self, seed: int) -> Conversation:
        self.numbers, self.target = generate_task(seed, self.count, self.max_number)
        self._correct = False
        return [{"role": "system", "content": SYSTEM}, *self._examples,
                {"role": "user", "content": _prompt(self.numbers, self.target)},
                {"role": "assistant", "content": PREFILL}]

    @property
    def success(self) -> bool:
        return self._correct

    def step(self, completion: str) -> StepResult:
        text = PREFILL + completion
        if "</answer>" not in text:
            text += "</answer>"  # the stop string is cut from completions
        reward, info = score_answer(text, self.numbers, self.target)
        self._correct = info["correct"]
        # The two parts of the reward: the answer's format, and its correctness.
        info[REWARD_COMPONENTS] = {
            "format": FORMAT_REWARD if info["formatted"] else 0.0,
            "correct": CORRECT_REWARD if info["correct"] else 0.0}
        return StepResult([], reward, True, info)


def _solve(numbers: list[int], target: int) -> str:
    """A solution expression by exhaustive search (few-shot examples, tests)."""
    exprs = [(Fraction(n), str(n)) for n in numbers]

    def search(items):
        if len(items) == 1:
            return items[0][1] if items[0][0] == target else None
        for i in range(len(items)):
            for j in range(len(items)):
                if i == j:
                    continue
                rest = [items[k] for k in range(len(items)) if k not in (i, j)]
                (a, ea), (b, eb) = items[i], items[j]
                cands = [(a + b, f"({ea} + {eb})"), (a - b, f"({ea} - {eb})"),
                         (a * b, f"({ea} * {eb})")]
                if b != 0:
                    cands.append((a / b, f"({ea} / {eb})"))
                for value, e in cands:
                    found = search(rest + [(value, e)])
                    if found:
                        return found
        return None

    found = search(exprs)
    if found is None:
        raise ValueError(f"no solution for {numbers} -> {target}")
    return found[1:-1] if found.startswith("(") and found.endswith(")") else found
