"""Math with a Python tool: a ReAct-style agent that may run code before it answers.

Each turn the policy either calls the tool, writing a fenced ```python block (run in the
sandbox; its output, or the typed error, comes back as the next user message), or
answers with an `Answer:` line (a \\boxed{} also counts). With `require_tool`, an answer
before any tool call is refused with feedback and costs the turn, as in the paper's
setting. Reward 1 for a correct answer, else 0; the episode ends at the answer or after
`max_turns`. Generated code never runs in this process.
"""

from __future__ import annotations

import functools
import re

from esopt.chat import Conversation
from esopt.data.math import MathProblem, load_problems
from esopt.envs.base import REWARD_COMPONENTS, Environment, StepResult, example_turns, register
from esopt.envs.math_answers import check_answer, extract_answer
from esopt.runtime.sandbox import SandboxLimits, run_sandboxed

SYSTEM = (
    "Solve the math problem. You have a Python tool: write code in a ```python block and "
    "stop; its printed output comes back to you. Use print() to see values. When you know "
    "the result, finish with a last line of the form 'Answer: <value>'."
)
# A harness in a light module: the child must not import torch (1 s and 0.5 GB) to run it.
TOOL_HARNESS = "esopt.runtime.sandbox:run_script"
# The worked example (option `example`): one solved exchange before the task. Without it
# SmolLM2-135M never answered in the tool protocol (0 of 16 generated problems; issue 37).
EXAMPLE = (
    {"role": "user", "content": "Compute 12 * 7 + 5."},
    {"role": "assistant", "content": "```python\nprint(12 * 7 + 5)\n```"},
    {"role": "user", "content": "```output\n89\n```"},
    {"role": "assistant", "content": "Answer: 89"},
)
_CODE = re.compile(r"```(?:python|py)\s*\n(.*?)(?:```|$)", re.DOTALL)


@functools.lru_cache(maxsize=8)
def _problems(source: str | tuple[str, ...]) -> tuple[MathProblem, ...]:
    return tuple(load_problems(source))


def tool_call(completion: str) -> str | None:
    """The first python block of a completion (closed, or cut by the stop string)."""
    m = _CODE.search(completion)
    return m.group(1).strip("\n") + "\n" if m and m.group(1).strip() else None


@register("math_tool")
class MathToolEnv(Environment):
    """Options: data (JSONL path or dataset id, or a list of them: interleaved), max_turns,
    require_tool, skill (text prepended to the system prompt: Trace2Skill), tool limits,
    output_chars, example (a solved exchange, a tool call then its answer, before each
    problem)."""

    stop = ("```output",)
    # Which checker judged the answer (esopt.envs.math_answers.check_answer), and the
    # problem's dataset (Table 3's DAPO and AIME 2026 columns).
    outcome_columns = {"decided_by": "string", "source": "string"}
    # Training draws task seed s as problem s mod the file's length (seeds are hashes);
    # evaluation takes problems 0..N-1, capped at num_tasks (esopt.pipeline.stages.eval_tasks).
    indexed_tasks = True

    def __init__(self, data: str | list[str], max_turns: int = 4, require_tool: bool = True,
                 skill: str = "", max_new_tokens: int = 256, output_chars: int = 800,
                 tool_wall_s: float = 10.0, tool_cpu_s: int = 5, tool_memory_mb: int = 1024,
                 use_math_verify: bool = True, example: bool = False):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.data = data
        self.problems = _problems(data if isinstance(data, str) else tuple(data))
        if not self.problems:
            raise ValueError(f"data: no problems in {data!r}")
        self.max_turns, self.require_tool, self.skill = max_turns, require_tool, skill
        self.max_new_tokens, self.output_chars = max_new_tokens, output_chars
        self.limits = SandboxLimits(wall_s=tool_wall_s, cpu_s=tool_cpu_s,
                                    memory_mb=tool_memory_mb, output_chars=output_chars)
        self.use_math_verify = use_math_verify
        self.example = example_turns(example, EXAMPLE)
        self._solved = False

    @property
    def num_tasks(self) -> int:
        """Problems in the data file: evaluation never asks for more (none repeats)."""
        return len(self.problems)

    def system_prompt(self) -> str:
        return f"{SYSTEM}\n\n{self.skill.strip()}" if self.skill.strip() else SYSTEM

    def reset(self, seed: int) -> Conversation:
        self.problem = self.problems[seed % len(self.problems)]
        self.turn, self.tool_calls, self._solved = 0, 0, False
        self.tool_outcomes: list[str] = []
        self.messages = [{"role": "system", "content": self.system_prompt()},
                         *self.example,
                         {"role": "user", "content": self.problem.question}]
        return list(self.messages)

    def _reply(self, completion: str, feedback: str, info: dict) -> StepResult:
        self.messages += [{"role": "assistant", "content": completion},
                          {"role": "user", "content": feedback}]
        done = self.turn >= self.max_turns
        return StepResult(list(self.messages), 0.0, done, {**info, **self._info()})

    def _info(self) -> dict:
        # The reference answer rides along for skill distillation; the policy never sees info.
        return {"problem_id": self.problem.id, "source": self.problem.source,
                "gold": self.problem.answer, "turn": self.turn,
                "tool_calls": self.tool_calls, "tool_outcomes": list(self.tool_outcomes)}

    def step(self, completion: str) -> StepResult:
        self.turn += 1
        code = tool_call(completion)
        if code is not None:
            result = run_sandboxed(code, TOOL_HARNESS, None, self.limits)
            self.tool_calls += 1
            self.tool_outcomes.append(result.outcome.value)
            if result.ok:
                output = (result.stdout + result.stderr).strip() or "(no output; use print)"
            else:
                output = f"Error ({result.outcome.value}): {result.detail.strip()[-400:]}"
            # The history keeps the completion up to its first block's closing fence (all
            # of it when the block was cut off unclosed, e.g. by the stop string).
            close = completion.find("```", completion.find("```") + 3)
            block = completion[: close + 3] if close >= 0 else completion
            return self._reply(block, f"```output\n{output[: self.output_chars]}\n```", {})
        answer = extract_answer(completion)
        if answer is None:
            return self._reply(completion, "Run Python in a ```python block, or finish with "
                                           "'Answer: <value>'.", {"answer": None})
        if self.require_tool and self.tool_calls == 0:
            return self._reply(completion, "Run the Python tool at least once before "
                                           "answering.", {"answer": answer, "refused": True})
        correct, decided_by = check_answer(answer, self.problem.answer, self.use_math_verify)
        self._solved = correct
        self.messages.append({"role": "assistant", "content": completion})
        return StepResult(list(self.messages), 1.0 if correct else 0.0, True,
                          {"answer": answer, "gold": self.problem.answer, "correct": correct,
                           "decided_by": decided_by, **self._info(),
                           REWARD_COMPONENTS: {"correct": 1.0 if correct else 0.0}})

    @property
    def success(self) -> bool:
        return self._solved
