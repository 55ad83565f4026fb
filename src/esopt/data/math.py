"""Math problems with reference answers: JSONL files by path, or Hugging Face dataset ids.

Tests and benchmarks read `../shared/data/math/*.jsonl` by path; real users may pass a
dataset id (`BytedTsinghua-SIA/DAPO-Math-17k`, `MathArena/aime_2026`), which needs the
`datasets` package and network. Both paths produce the same records. Several sources (a
list) are interleaved, so that the first N problems of the held-out set are an even mix
of them (esopt.pipeline.stages.eval_tasks takes the first N) and all of them once N is
their total; each problem keeps its source (Table 3 has a column group per source).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from esopt.data.files import DataFileError, read_jsonl

# Where each known dataset id keeps its question and answer.
HUB_FIELDS = {
    "BytedTsinghua-SIA/DAPO-Math-17k": ("prompt", "reward_model"),
    "MathArena/aime_2026": ("problem", "answer"),
}


@dataclass(frozen=True)
class MathProblem:
    id: str
    question: str
    answer: str
    source: str = ""
    """The dataset it comes from (a record's `source`, else the file name or dataset id)."""


def _answer_of(value) -> str:
    if isinstance(value, dict):  # DAPO: {"ground_truth": ..., "style": "rule"}
        value = value.get("ground_truth", value.get("answer"))
    return str(value).strip()


def _question_of(value) -> str:
    if isinstance(value, list):  # DAPO: a chat list [{"role": "user", "content": ...}]
        value = next((m["content"] for m in value if m.get("role") == "user"), value[0]["content"])
    return str(value)


def _problem(record, default_id: str, question_key: str, answer_key: str,
             source: str = "") -> MathProblem:
    """One record as a MathProblem, or ValueError saying what is wrong with it."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    if question_key not in record or answer_key not in record:
        raise ValueError(f"needs {question_key!r} and {answer_key!r}, has {sorted(record)}")
    try:
        question = _question_of(record[question_key])
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ValueError(f"{question_key!r} is neither text nor a chat list with a user "
                         "message") from None
    return MathProblem(str(record.get("id", default_id)), question,
                       _answer_of(record[answer_key]), str(record.get("source") or source))


def from_records(records, question_key: str = "question", answer_key: str = "answer",
                 source: str = "") -> list[MathProblem]:
    """MathProblems from dict records; each needs a question and an answer."""
    out = []
    for i, r in enumerate(records):
        try:
            out.append(_problem(r, f"{source}:{i}", question_key, answer_key, source))
        except ValueError as e:
            raise ValueError(f"{source} record {i}: {e}") from None
    return out


def load_jsonl(path: str | Path) -> list[MathProblem]:
    """One JSON object per line with `question` and `answer` (and optionally `id`); a bad
    line raises DataFileError naming the file and the line."""
    path = Path(path)
    out = []
    for i, (lineno, record) in enumerate(read_jsonl(path)):
        try:
            out.append(_problem(record, f"{path.name}:{i}", "question", "answer", path.name))
        except ValueError as e:
            raise DataFileError.at(path, lineno, e) from None
    return out


def load_hub(dataset_id: str, split: str = "train", limit: int | None = None,
             seed: int = 0) -> list[MathProblem]:
    """A Hugging Face dataset by id (network), optionally a seeded subset of `limit`."""
    try:
        import datasets
    except ImportError as e:
        raise RuntimeError("loading a dataset id needs `pip install datasets`") from e
    q, a = HUB_FIELDS.get(dataset_id, ("question", "answer"))
    ds = datasets.load_dataset(dataset_id, split=split)
    records = list(ds)
    if limit is not None and limit < len(records):
        records = random.Random(seed).sample(records, limit)
    return from_records(records, q, a, source=dataset_id)


def generated_problems(count: int, seed: int = 0) -> list[MathProblem]:
    """Integer-answer arithmetic problems, a deterministic function of (count, seed).

    Sized so a small model with a Python tool can solve some (the tiny scale's training
    problems): a tool call computes them exactly, mental arithmetic often does not.
    """
    rng = random.Random(f"math-generated/{seed}")
    out = []
    for i in range(count):
        a, b, c = rng.randint(12, 99), rng.randint(12, 99), rng.randint(2, 9)
        kind = rng.randrange(3)
        if kind == 0:
            q, ans = f"Compute {a} * {b} + {c}.", a * b + c
        elif kind == 1:
            q, ans = f"What is the sum of the integers from {c} to {a + b} inclusive?", \
                sum(range(c, a + b + 1))
        else:
            q, ans = f"What is the remainder when {a}^{c} is divided by {b}?", pow(a, c, b)
        out.append(MathProblem(f"gen{seed}:{i}", q, str(ans), f"generated:{seed}"))
    return out


def load_problems(source: str | Sequence[str]) -> list[MathProblem]:
    """`generated:COUNT:SEED`, a path to a .jsonl file, or a dataset id; or a list of
    them, interleaved (the first problem of each, then the second of each, ...)."""
    if not isinstance(source, str):
        sets = [load_problems(s) for s in source]
        return [p for i in range(max(map(len, sets), default=0))
                for p in (s[i] for s in sets if i < len(s))]
    if source.startswith("generated:"):
        _, count, seed = (source.split(":") + ["0"])[:3]
        return generated_problems(int(count), int(seed))
    if source.endswith(".jsonl") or Path(source).exists():
        return load_jsonl(source)
    return load_hub(source)
