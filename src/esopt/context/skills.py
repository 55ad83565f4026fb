"""Trace2Skill: lessons distilled from failed trajectories into one bounded SKILL.md.

From completed episodes, at most one failed trajectory per problem is shown to a writer
model (the policy itself, or any other `Policy`), which states one general lesson; the
lessons are deduplicated (normalised text and token overlap) and merged into a SKILL.md
of bounded length, which `MathToolEnv(skill=...)` prepends to the system prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from esopt.chat import SamplingParams

LESSON_PROMPT = (
    "Below is an attempt by an assistant to solve a math problem with a Python tool. The "
    "attempt failed (the correct answer was {gold}). Write ONE short, general lesson (one "
    "sentence, no problem-specific numbers) that would help solve similar problems with "
    "the tool. Reply with the lesson only.\n\nProblem:\n{question}\n\nAttempt:\n{attempt}"
)
SKILL_HEADER = "# Skills (lessons from earlier attempts)\n"


def failed_trajectories(episodes: Sequence[dict], per_problem: int = 1) -> list[dict]:
    """Failed episodes, at most `per_problem` per problem id, in their original order.

    An episode is a dict with `problem_id`, `question`, `gold`, `success` and
    `transcript` (the assistant/tool turns as text).
    """
    taken: dict[str, int] = {}
    out = []
    for ep in episodes:
        if ep["success"]:
            continue
        n = taken.get(ep["problem_id"], 0)
        if n < per_problem:
            taken[ep["problem_id"]] = n + 1
            out.append(ep)
    return out


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


_MARKERS = re.compile(r"^(?:\s*(?:[-*\u2022]|\d+[.)]|lesson\s*:))+\s*", re.IGNORECASE)


def clean_lesson(text: str, max_chars: int = 300) -> str | None:
    """First non-empty line, without list markers; None when nothing usable remains."""
    for line in text.strip().splitlines():
        line = _MARKERS.sub("", line).strip()
        if len(_tokens(line)) >= 3:
            return line[:max_chars]
    return None


def merge_lessons(lessons: Sequence[str], max_chars: int = 2000,
                  overlap: float = 0.7) -> str:
    """SKILL.md: unique lessons (Jaccard token overlap < `overlap`), cut at `max_chars`."""
    kept: list[tuple[str, set[str]]] = []
    for lesson in lessons:
        tokens = _tokens(lesson)
        if not tokens or any(len(tokens & t) / len(tokens | t) >= overlap for _, t in kept):
            continue
        kept.append((lesson, tokens))
    text = SKILL_HEADER
    for lesson, _ in kept:
        line = f"- {lesson}\n"
        if len(text) + len(line) > max_chars:
            break
        text += line
    return text


def distill_skill(writer, episodes: Sequence[dict], sampling: SamplingParams | None = None,
                  per_problem: int = 1, max_chars: int = 2000,
                  attempt_chars: int = 1500) -> tuple[str, list[str]]:
    """(SKILL.md text, raw lessons) from the failed trajectories among `episodes`."""
    sampling = sampling or SamplingParams(max_new_tokens=64, temperature=0.0)
    failed = failed_trajectories(episodes, per_problem)
    if not failed:
        return SKILL_HEADER, []
    prompts = [[{"role": "user", "content": LESSON_PROMPT.format(
        gold=ep["gold"], question=ep["question"][:1500],
        attempt=ep["transcript"][-attempt_chars:])}] for ep in failed]
    raw = [c.text for c in writer.generate(prompts, sampling)]
    lessons = [lesson for lesson in (clean_lesson(r) for r in raw) if lesson]
    return merge_lessons(lessons, max_chars=max_chars), raw
