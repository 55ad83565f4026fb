"""DocVQA with an OCR tool: a text-only agent answers a question about a page image.

The page lies in the sandbox's working directory as `page.png` (`page.jpg` for a
Hub scan); the policy never sees
pixels. Each turn it either runs commands, writing a fenced ```bash block (interpreted by
`esopt.tools.shell` inside the sandbox child: `ocr page.png`, `grep`, `head`, ...; the
output, or the error, comes back as the next user message), or answers with a
`Final answer: <text>` line. The reward is the answer's ANLS (`esopt.envs.anls`), forced
to 0 when the tool was never used, as in the paper; info carries ANLS and exact-match
accuracy (scored the same way) and the answer's own values. The episode ends at the
answer or after `max_turns`. Generated commands never run in this process.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re

from esopt.chat import Conversation
from esopt.data.docs import DocTask, image_name, load_docs
from esopt.envs.anls import anls, exact_match
from esopt.envs.base import Environment, StepResult, example_turns, register
from esopt.runtime.sandbox import SandboxLimits, run_sandboxed

SYSTEM = (
    "Answer the question about a document. The document is an image file in your working "
    "directory (its name comes with the question); you cannot see it, but you have a shell "
    "tool: write commands in a ```bash block and stop, and their output comes back to you. "
    "`ocr FILE` prints the page's text, one line per row; grep, head, tail, cat, wc and ls "
    "work too. "
    "When you know the answer, finish with a last line of the form "
    "'Final answer: <answer>', copying the answer as it is written on the page."
)
# A light harness when the page's OCR is cached (no onnxruntime import in the child), the
# one that loads the OCR engine before the sandbox's guard when it is not.
HARNESS, HARNESS_OCR = "esopt.tools.shell:run_commands", "esopt.tools.shell_ocr:run_commands"
# The worked example (option `example`): one solved exchange before the task. SmolLM2-135M
# then runs OCR and answers with a labelled value in nearly every episode (issue 37). Its
# answer is not the page's first field: an example that asked for the first made 135M copy
# the first ID-like value of every page (1 of 16 right; this one: 4 of 16).
EXAMPLE = (
    {"role": "user", "content": "Document: page.png\nQuestion: What is the Cashier?"},
    {"role": "assistant", "content": "```bash\nocr page.png\n```"},
    {"role": "user", "content": "```output\nRECEIPT\nStore: Harbor Lights\nCashier: Ana Ortiz\n"
                                "Date: 03/05/2021\n```"},
    {"role": "assistant", "content": "Final answer: Ana Ortiz"},
)
_BLOCK = re.compile(r"```(?:bash|sh|shell|console)\s*\n(.*?)(?:```|$)", re.DOTALL)
_FINAL = re.compile(r"final answer\s*[:：]\s*(.+)", re.IGNORECASE)
# OCR results by page hash, filled only from what the sandbox returned. OCR is
# deterministic, and an ES generation shows every page to all G directions.
_OCR_CACHE: dict[str, str] = {}
_OCR_CACHE_MAX = 4096


@functools.lru_cache(maxsize=8)
def _tasks(source: str, layout: str) -> tuple[DocTask, ...]:
    return tuple(load_docs(source, layout))


def tool_call(completion: str) -> str | None:
    """The first bash block of a completion (closed, or cut by the stop string)."""
    m = _BLOCK.search(completion)
    return m.group(1).strip("\n") + "\n" if m and m.group(1).strip() else None


def extract_final_answer(completion: str) -> str | None:
    """The text after the last 'Final answer:', without quotes or a trailing period."""
    found = _FINAL.findall(completion)
    if not found:
        return None
    answer = found[-1].strip().rstrip(".").strip("`*\"' ").rstrip(".").strip()
    return answer or None


def remember_ocr(results: dict) -> None:
    """Keep OCR texts the sandbox computed (bounded: the oldest go first)."""
    for key, text in results.items():
        if isinstance(key, str) and isinstance(text, str):
            _OCR_CACHE[key] = text
    while len(_OCR_CACHE) > _OCR_CACHE_MAX:
        _OCR_CACHE.pop(next(iter(_OCR_CACHE)))


@register("docvqa")
class DocVQAEnv(Environment):
    """Options: data (`synthetic:COUNT:SEED` or a dataset id, see `load_docs`), layout
    (synthetic pages: full, or short: a few labelled fields, one asked), max_turns, skill
    (text appended to the system prompt), tool limits (`ocr_s` more seconds when the page
    must be OCRed), output_chars, ocr_cache (reuse a page's OCR text by its hash), example
    (a solved exchange, OCR then the answer, before each task)."""

    stop = ("```output",)
    # The scored ANLS and exact-match accuracy (0 without a tool use, like the reward).
    outcome_columns = {"anls": "float64", "accuracy": "float64"}
    # Training draws task seed s as document s mod the number of documents (seeds are
    # hashes); evaluation takes documents 0..N-1, capped at num_tasks (stages.eval_tasks).
    indexed_tasks = True

    def __init__(self, data: str = "synthetic:64:0", max_turns: int = 4, skill: str = "",
                 max_new_tokens: int = 256, output_chars: int = 1500,
                 tool_wall_s: float = 20.0, tool_cpu_s: int = 10, tool_memory_mb: int = 2048,
                 ocr_s: int = 120, ocr_cache: bool = True, example: bool = False,
                 layout: str = "full"):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.data, self.layout, self.tasks = data, layout, _tasks(data, layout)
        if not self.tasks:
            raise ValueError(f"data: no documents in {data!r}")
        self.max_turns, self.skill, self.max_new_tokens = max_turns, skill, max_new_tokens
        self.output_chars, self.ocr_cache = output_chars, ocr_cache
        self.example = example_turns(example, EXAMPLE)
        self.limits = SandboxLimits(wall_s=tool_wall_s, cpu_s=tool_cpu_s,
                                    memory_mb=tool_memory_mb, output_chars=output_chars)
        # A call that must OCR the page (not cached) gets `ocr_s` more wall and CPU seconds:
        # a 1700x2200 scan takes ~30 s on a loaded 2-core machine, a synthetic page 2-10 s.
        self.ocr_limits = dataclasses.replace(self.limits, wall_s=tool_wall_s + ocr_s,
                                              cpu_s=tool_cpu_s + ocr_s)
        self._solved = False

    @property
    def num_tasks(self) -> int:
        """Documents in the data: evaluation never asks for more (none repeats)."""
        return len(self.tasks)

    def system_prompt(self) -> str:
        return f"{SYSTEM}\n\n{self.skill.strip()}" if self.skill.strip() else SYSTEM

    def reset(self, seed: int) -> Conversation:
        self.task = self.tasks[seed % len(self.tasks)]
        self.page_hash = hashlib.sha256(self.task.image).hexdigest()
        self.image_name = image_name(self.task.image)  # page.png, or page.jpg (Hub scans)
        self.turn, self.tool_calls, self._solved = 0, 0, False
        self.tool_outcomes: list[str] = []
        question = f"Document: {self.image_name}\nQuestion: {self.task.question}"
        self.messages = [{"role": "system", "content": self.system_prompt()},
                         *self.example,
                         {"role": "user", "content": question}]
        return list(self.messages)

    def _info(self) -> dict:
        # The gold answers ride along for analysis and skills (problem_id: what Trace2Skill
        # groups trajectories by); the policy never sees info.
        return {"doc_id": self.task.id, "problem_id": self.task.id,
                "gold": list(self.task.answers), "turn": self.turn,
                "tool_calls": self.tool_calls, "tool_outcomes": list(self.tool_outcomes)}

    def _reply(self, completion: str, feedback: str, info: dict) -> StepResult:
        self.messages += [{"role": "assistant", "content": completion},
                          {"role": "user", "content": feedback}]
        done = self.turn >= self.max_turns
        end = {"anls": 0.0, "accuracy": 0.0} if done else {}
        return StepResult(list(self.messages), 0.0, done, {**info, **end, **self._info()})

    def run_tool(self, script: str) -> str:
        """Run a command script in the sandbox, the page in its working directory."""
        cached = self.ocr_cache and self.page_hash in _OCR_CACHE
        payload = {"script": script, "max_chars": self.output_chars,
                   "ocr_cache": {self.page_hash: _OCR_CACHE[self.page_hash]} if cached else {}}
        result = run_sandboxed("", HARNESS if cached else HARNESS_OCR, payload,
                               self.limits if cached else self.ocr_limits,
                               files={self.image_name: self.task.image})
        self.tool_calls += 1
        self.tool_outcomes.append(result.outcome.value)
        if not result.ok:
            return f"Error ({result.outcome.value}): {result.detail.strip()[-400:]}"
        value = result.value if isinstance(result.value, dict) else {}
        if self.ocr_cache:
            remember_ocr(value.get("ocr") or {})
        return str(value.get("output", "")).strip() or "(no output)"

    def step(self, completion: str) -> StepResult:
        self.turn += 1
        script = tool_call(completion)
        if script is not None:
            output = self.run_tool(script)
            # The history keeps the completion up to its first block's closing fence (all
            # of it when the block was cut off unclosed).
            close = completion.find("```", completion.find("```") + 3)
            block = completion[: close + 3] if close >= 0 else completion
            return self._reply(block, f"```output\n{output[: self.output_chars]}\n```", {})
        answer = extract_final_answer(completion)
        if answer is None:
            return self._reply(completion, "Run commands in a ```bash block (try `ocr "
                               f"{self.image_name}`), or finish with 'Final answer: <answer>'.",
                               {"answer": None})
        score, correct = anls(answer, self.task.answers), exact_match(answer, self.task.answers)
        used_tool = self.tool_calls > 0
        self._solved = correct and used_tool
        self.messages.append({"role": "assistant", "content": completion})
        # "anls"/"accuracy" are the scored values (0 without a tool use, like the reward);
        # "answer_anls"/"answer_accuracy" judge the answer alone.
        return StepResult(list(self.messages), score if used_tool else 0.0, True,
                          {"answer": answer, "anls": score if used_tool else 0.0,
                           "accuracy": float(self._solved), "answer_anls": score,
                           "answer_accuracy": float(correct), "tool_used": used_tool,
                           **self._info()})

    @property
    def success(self) -> bool:
        """Exact match, with the tool used (the reward's own condition)."""
        return self._solved


# --- a scripted oracle: OCR, then a simple rule over the question and the text ---------

_MONEY = re.compile(r"\$?\d[\d,]*\.\d\d")
_QUANTITY_Q = re.compile(r"what is the quantity of (.+?)\?", re.IGNORECASE)
_AMOUNT_Q = re.compile(r"what is the amount for (.+?)\?", re.IGNORECASE)
_LETTER_Q = re.compile(r"who is the letter (to|from)\?", re.IGNORECASE)
_FIELD_Q = re.compile(r"what is the (.+?)\?", re.IGNORECASE)


def _squash(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def oracle_answer(question: str, text: str) -> str:
    """Answer a synthetic page's question from its OCR text by a fixed rule: a field is the
    text after "<label>:" on its line; a table cell is read from the row naming the item."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern, pick in ((_QUANTITY_Q, "qty"), (_AMOUNT_Q, "amount")):
        m = pattern.search(question)
        if m:
            row = next((ln for ln in lines if _squash(m.group(1)) in _squash(ln)), "")
            rest = row[len(m.group(1)):] if row.lower().startswith(m.group(1).lower()) else row
            if pick == "qty":
                found = re.findall(r"(?<![\d$.,])\d+(?![\d.,])", rest)
                return found[0] if found else ""
            found = _MONEY.findall(row)
            return found[-1] if found else ""
    m = _LETTER_Q.search(question) or _FIELD_Q.search(question)
    label = _squash(m.group(1)) if m else ""
    for line in lines:
        for cell in re.split(r"\s{2,}", line):
            key, sep, value = cell.partition(":")
            if sep and _squash(key) == label:
                return value.strip()
    return ""


def oracle_policy(observation: Conversation) -> str:
    """The oracle's next completion: run `ocr page.png`, then answer from its output."""
    last = observation[-1]["content"]
    # The task's question: the last one asked (a worked example's comes before it).
    first = next(m["content"] for m in reversed(observation)
                 if m["role"] == "user" and m["content"].startswith("Document:"))
    if not last.startswith("```output"):
        name = re.search(r"Document: (\S+)", first)
        return f"Let me read the page.\n```bash\nocr {name.group(1) if name else 'page.png'}\n```"
    question = first.split("Question:", 1)[-1].strip()
    text = last.removeprefix("```output").removesuffix("```")
    return f"Final answer: {oracle_answer(question, text)}"
