"""EoH's prompt operators (i1, e1, e2, m1, m2) and the parsing of the LLM's answer.

The wording follows EoH (Liu et al., ICML 2024, `eoh_evolution.py`): a one-sentence
algorithm description inside braces, then a Python function with the problem's exact
signature. With `prefill=True` the assistant turn is started with the function header,
which small models (SmolLM2-135M at the tiny scale) need to produce code at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from esopt.ahd.problems import Problem


@dataclass(frozen=True)
class Parent:
    """A heuristic the prompt shows to the LLM."""

    description: str
    code: str
    objective: float


def _signature(problem: Problem) -> str:
    return f"def {problem.entry}({', '.join(problem.inputs)}):"


def _format_spec(problem: Problem) -> str:
    names = lambda xs: ", ".join(f"'{x}'" for x in xs)  # noqa: E731
    return (
        "First, describe your new algorithm and main steps in one sentence. The description "
        "must be inside a brace. Next, implement it in Python as a function named "
        f"{problem.entry}. This function should accept {len(problem.inputs)} input(s): "
        f"{names(problem.inputs)}. The function should return {len(problem.outputs)} "
        f"output(s): {names(problem.outputs)}. {problem.io_note} "
        "All inputs and outputs are Numpy arrays or Python numbers where applicable; use "
        "only numpy and the standard library.\nDo not give additional explanations."
    )


def _show(parents: list[Parent]) -> str:
    return "".join(
        f"No.{i + 1} algorithm and the corresponding code are:\n{p.description}\n{p.code}\n"
        for i, p in enumerate(parents)
    )


def operator_prompt(problem: Problem, operator: str, parents: list[Parent] = ()) -> str:
    """The user message of one EoH operator."""
    task, spec = problem.task, _format_spec(problem)
    if operator == "i1":
        if parents:  # a seed heuristic to start from (the tiny scale shows the greedy one)
            return (f"{task}\nHere is a simple algorithm for reference:\n{parents[0].code}\n"
                    f"Please write a better one.\n{spec}")
        return f"{task}\n{spec}"
    if operator in ("e1", "e2"):
        if len(parents) < 1:
            raise ValueError(f"{operator} needs parents")
        head = f"{task}\nI have {len(parents)} existing algorithms with their codes as follows:\n"
        if operator == "e1":
            ask = ("Please help me create a new algorithm that has a totally different form "
                   "from the given ones.\n")
        else:
            ask = ("Please help me create a new algorithm that has a totally different form "
                   "from the given ones but can be motivated from them.\nFirstly, identify the "
                   "common backbone idea in the provided algorithms. Secondly, based on the "
                   "backbone idea describe your new algorithm in one sentence. The description "
                   "must be inside a brace. Thirdly, implement it in Python.\n")
        return f"{head}{_show(list(parents))}{ask}{spec}"
    if operator in ("m1", "m2"):
        if len(parents) != 1:
            raise ValueError(f"{operator} takes exactly one parent, got {len(parents)}")
        p = parents[0]
        head = (f"{task}\nI have one algorithm with its code as follows. Algorithm "
                f"description: {p.description}\nCode:\n{p.code}\n")
        if operator == "m1":
            ask = ("Please assist me in creating a new algorithm that has a different form "
                   "but can be a modified version of the algorithm provided.\n")
        else:
            ask = ("Please identify the main algorithm parameters and assist me in creating a "
                   "new algorithm that has a different parameter settings of the score "
                   "function provided.\n")
        return f"{head}{ask}{spec}"
    raise ValueError(f"unknown EoH operator {operator!r}; expected i1, e1, e2, m1 or m2")


def conversation(problem: Problem, operator: str, parents: list[Parent] = (),
                 prefill: bool = False) -> list[dict]:
    """Chat messages for one proposal; with `prefill`, the answer starts at the signature."""
    messages = [{"role": "user", "content": operator_prompt(problem, operator, parents)}]
    if prefill:
        messages.append({"role": "assistant", "content": prefill_text(problem)})
    return messages


def prefill_text(problem: Problem) -> str:
    # Ends inside the body, indented: small models otherwise leave the body unindented.
    return f"```python\nimport numpy as np\n\n{_signature(problem)}\n    "


_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)(?:```|$)", re.DOTALL)
_BRACE = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Proposal:
    """What the LLM proposed: a description (may be empty) and code (None: none found)."""

    description: str
    code: str | None


def parse_proposal(problem: Problem, text: str, prefill: bool = False) -> Proposal:
    """Description in braces, code from a fenced block or from `import`/`def` onwards."""
    if prefill:
        text = prefill_text(problem) + text
    before_code = text.split("```")[0] if "```" in text else text.split("def ")[0]
    brace = _BRACE.search(before_code)
    description = brace.group(1).strip() if brace else ""
    code = None
    for block in _FENCE.findall(text):
        if f"def {problem.entry}" in block:
            code = block
            break
    if code is None:
        start = re.search(r"^(import |from |def )", text, re.MULTILINE)
        if start and f"def {problem.entry}" in text[start.start():]:
            code = text[start.start():]
    if code is not None:
        code = code.strip("\n") + "\n"
        if not description:
            comment = re.search(r'"""(.*?)"""|#\s*(.+)', code, re.DOTALL)
            description = (comment.group(1) or comment.group(2) or "").strip() if comment else ""
    return Proposal(description[:500], code)
