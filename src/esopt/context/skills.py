"""Trace2Skill: lessons from an agent's trajectories, consolidated into one bounded SKILL.md.

After Trace2Skill (Ni et al. 2026, arXiv 2603.25158): analysts read trajectories one at a
time, successes (what made it work) and failures (the root cause), each stating one
general lesson; the lessons are then consolidated hierarchically (groups of lessons
merged into rule lists, the lists merged pairwise, the result merged into the current
skill) into one conflict-free list of rules, bounded in rules and characters: the
SKILL.md an environment prepends to its system prompt (`skill=`). The writer is any
`Policy` (the agent's own model in the pipeline).

Two uses, as the paper's Table 12: the Trace2Skill baseline iterates (each iteration
plays tasks with the current SKILL.md, analyses those trajectories and consolidates,
`trace2skill`), and Agentic ESOpt + Trace2Skill distils once, post hoc, from the ES run's
trajectories (`distill_skill`).

Each environment has its own prompts (PROMPTS: math with a Python tool, web tasks,
DocVQA with OCR; a generic set for the others). A writer whose reply holds no usable rule
(a small model) leaves the rules to a deterministic merge of the lessons (normalised
token overlap), so a SKILL.md is always well formed and bounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from esopt.chat import SamplingParams

SKILL_HEADER = "# Skills (lessons from earlier attempts)\n"


@dataclass(frozen=True)
class SkillPrompts:
    """One environment's Trace2Skill prompts (str.format templates)."""

    success: str
    """{question} {attempt} -> one lesson from a successful trajectory."""
    failure: str
    """{question} {attempt} {gold} -> one lesson from a failed trajectory."""
    consolidate: str
    """{skill} {lessons} {max_rules} -> the merged list of rules."""


_ONE_LESSON = ("Reply with ONE general lesson: one imperative sentence, no task-specific "
               "numbers, names or values. Reply with the lesson only.")
_CONSOLIDATE = (
    "Merge the current skill and the new lessons into ONE list of at most {max_rules} "
    "general, non-conflicting rules: keep what the lessons confirm, correct or drop what "
    "they contradict, merge duplicates into one rule, leave out anything specific to one "
    "task. Reply with the list only, one rule per line, each line starting with '- '."
    "\n\nCurrent skill:\n{skill}\n\nNew lessons:\n{lessons}")

PROMPTS = {
    "math_tool": SkillPrompts(
        success=("An assistant solved the math problem below by running Python in a tool "
                 "and ending with 'Answer: <value>'; its answer was correct. What in its "
                 "use of the tool or in its final answer made it work? " + _ONE_LESSON
                 + "\n\nProblem:\n{question}\n\nAttempt:\n{attempt}"),
        failure=("An assistant tried to solve the math problem below by running Python in a "
                 "tool and ending with 'Answer: <value>'; it failed (the correct answer was "
                 "{gold}). Find the root cause: wrong method, a code error, an unused tool "
                 "output, a misread question, or a badly formatted or missing answer. "
                 + _ONE_LESSON + "\n\nProblem:\n{question}\n\nAttempt:\n{attempt}"),
        consolidate=("You maintain the SKILL.md of an assistant that solves math problems "
                     "with a Python tool. " + _CONSOLIDATE)),
    "web": SkillPrompts(
        success=("A web agent completed the task below by issuing browser actions (click, "
                 "type, scroll, go_back, stop [answer]) on a website. Which navigation or "
                 "answering choices made it succeed? " + _ONE_LESSON
                 + "\n\nTask and first page:\n{question}\n\nActions:\n{attempt}"),
        failure=("A web agent failed the task below, issuing browser actions (click, type, "
                 "scroll, go_back, stop [answer]) on a website; the task's check wanted: "
                 "{gold}. Find the root cause: a wrong page or element, an action in the "
                 "wrong format, a missed search or filter, a change not saved, stopping too "
                 "early or never, or a wrong answer text. " + _ONE_LESSON
                 + "\n\nTask and first page:\n{question}\n\nActions:\n{attempt}"),
        consolidate=("You maintain the SKILL.md of a web agent that completes tasks on "
                     "websites with browser actions. " + _CONSOLIDATE)),
    "docvqa": SkillPrompts(
        success=("An assistant answered the question about a document page below, reading "
                 "the page with an OCR tool first; its answer matched. What in its use of "
                 "the OCR output or in its answer made it work? " + _ONE_LESSON
                 + "\n\nQuestion:\n{question}\n\nAttempt:\n{attempt}"),
        failure=("An assistant tried to answer the question about a document page below, "
                 "reading the page with an OCR tool; it failed (accepted answers: {gold}). "
                 "Find the root cause: no OCR call, the wrong field or line read, extra "
                 "words around the value, a misread question, or no final answer line. "
                 + _ONE_LESSON + "\n\nQuestion:\n{question}\n\nAttempt:\n{attempt}"),
        consolidate=("You maintain the SKILL.md of an assistant that answers questions "
                     "about document pages with an OCR tool. " + _CONSOLIDATE)),
}
GENERIC = SkillPrompts(
    success=("An agent succeeded at the task below. What made it work? " + _ONE_LESSON
             + "\n\nTask:\n{question}\n\nAttempt:\n{attempt}"),
    failure=("An agent failed the task below (expected: {gold}). Find the root cause. "
             + _ONE_LESSON + "\n\nTask:\n{question}\n\nAttempt:\n{attempt}"),
    consolidate="You maintain the SKILL.md of an agent. " + _CONSOLIDATE)


def prompts_for(env: str) -> SkillPrompts:
    """The environment's Trace2Skill prompts (GENERIC for one without its own)."""
    return PROMPTS.get(env, GENERIC)


@dataclass(frozen=True)
class SkillLimits:
    """Bounds of a SKILL.md and of the writer's work on it."""

    max_chars: int = 2000
    max_rules: int = 8
    merge_batch: int = 8
    """Lessons merged by one consolidation call (the first level of the hierarchy)."""
    per_problem: int = 1
    """Successful and failed trajectories analysed per problem (each)."""
    attempt_chars: int = 1500
    question_chars: int = 1500
    lesson_tokens: int = 64
    rule_tokens: int = 40
    """The writer's budget per rule of a consolidation reply."""

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_rules", "merge_batch", "per_problem", "attempt_chars",
                     "question_chars", "lesson_tokens", "rule_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def select_trajectories(episodes: Sequence[dict], per_problem: int = 1) -> list[dict]:
    """At most `per_problem` successful and `per_problem` failed episodes per problem id,
    in their original order.

    An episode is a dict with `problem_id`, `question`, `gold`, `success` and
    `transcript` (the assistant/tool turns as text).
    """
    taken: dict[tuple[str, bool], int] = {}
    out = []
    for ep in episodes:
        key = (ep["problem_id"], bool(ep["success"]))
        n = taken.get(key, 0)
        if n < per_problem:
            taken[key] = n + 1
            out.append(ep)
    return out


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


_MARKERS = re.compile(r"^(?:\s*(?:[-*\u2022]|\d+[.)]|(?:lesson|rule)\s*:))+\s*", re.IGNORECASE)


def clean_lesson(text: str, max_chars: int = 300) -> str | None:
    """First non-empty line, without list markers; None when nothing usable remains."""
    for line in text.strip().splitlines():
        line = _MARKERS.sub("", line).strip()
        if len(_tokens(line)) >= 3:
            return line[:max_chars]
    return None


def parse_rules(text: str, max_chars: int = 300) -> list[str]:
    """The rules of a consolidation reply: every line with a usable rule, markers off."""
    return [r for r in (clean_lesson(line, max_chars) for line in text.splitlines()) if r]


def dedupe(rules: Sequence[str], overlap: float = 0.7) -> list[str]:
    """Rules in order, each dropped when its token Jaccard overlap with a kept one is
    >= `overlap` (normalised duplicates)."""
    kept: list[tuple[str, set[str]]] = []
    for rule in rules:
        tokens = _tokens(rule)
        if not tokens or any(len(tokens & t) / len(tokens | t) >= overlap for _, t in kept):
            continue
        kept.append((rule, tokens))
    return [r for r, _ in kept]


def render_skill(rules: Sequence[str], limits: SkillLimits = SkillLimits()) -> str:
    """SKILL.md: the header and at most max_rules rules, cut at max_chars."""
    text = SKILL_HEADER
    for rule in list(rules)[:limits.max_rules]:
        line = f"- {rule}\n"
        if len(text) + len(line) > limits.max_chars:
            break
        text += line
    return text


def skill_rules(skill: str) -> list[str]:
    """The rules of a SKILL.md (its `- ` lines)."""
    return [line[2:].strip() for line in skill.splitlines() if line.startswith("- ")]


def analyse(writer, episodes: Sequence[dict], prompts: SkillPrompts,
            limits: SkillLimits = SkillLimits()) -> tuple[list[dict], list[str]]:
    """One lesson per selected trajectory (select_trajectories): [{problem_id, success,
    lesson}] for the usable ones, and the writer's raw replies."""
    chosen = select_trajectories(episodes, limits.per_problem)
    if not chosen:
        return [], []
    texts = []
    for ep in chosen:
        template = prompts.success if ep["success"] else prompts.failure
        texts.append(template.format(gold=ep["gold"],
                                     question=ep["question"][:limits.question_chars],
                                     attempt=ep["transcript"][-limits.attempt_chars:]))
    sampling = SamplingParams(max_new_tokens=limits.lesson_tokens, temperature=0.0)
    raw = [c.text for c in writer.generate([[{"role": "user", "content": t}] for t in texts],
                                           sampling)]
    lessons = [{"problem_id": ep["problem_id"], "success": bool(ep["success"]), "lesson": lesson}
               for ep, lesson in zip(chosen, (clean_lesson(r) for r in raw), strict=True)
               if lesson]
    return lessons, raw


def _merge(writer, current: Sequence[str], new: Sequence[str], prompts: SkillPrompts,
           limits: SkillLimits) -> list[str]:
    """One consolidation call: the writer's merged rules, or (a reply without a usable
    rule) the deterministic merge; at most max_rules either way."""
    if not new:
        return list(current)[:limits.max_rules]
    text = prompts.consolidate.format(
        max_rules=limits.max_rules,
        skill="\n".join(f"- {r}" for r in current) or "(none yet)",
        lessons="\n".join(f"- {r}" for r in new))
    sampling = SamplingParams(max_new_tokens=limits.rule_tokens * limits.max_rules,
                              temperature=0.0)
    reply = writer.generate([[{"role": "user", "content": text}]], sampling)[0].text
    rules = dedupe(parse_rules(reply)) or dedupe([*current, *new])
    return rules[:limits.max_rules]


def consolidate(writer, rules: Sequence[str], lessons: Sequence[str], prompts: SkillPrompts,
                limits: SkillLimits = SkillLimits()) -> list[str]:
    """The current rules with the new lessons merged in, hierarchically: duplicates out,
    groups of merge_batch lessons merged into rule lists, the lists merged pairwise until
    one is left, then that one merged into the current rules."""
    lessons = dedupe(lessons)
    if not lessons:
        return list(rules)[:limits.max_rules]
    level = [_merge(writer, [], lessons[i:i + limits.merge_batch], prompts, limits)
             for i in range(0, len(lessons), limits.merge_batch)]
    while len(level) > 1:
        level = [_merge(writer, level[i], level[i + 1], prompts, limits) if i + 1 < len(level)
                 else level[i] for i in range(0, len(level), 2)]
    return _merge(writer, rules, level[0], prompts, limits) if rules else level[0]


def distill_skill(writer, episodes: Sequence[dict], prompts: SkillPrompts = GENERIC,
                  limits: SkillLimits = SkillLimits(), skill: str = SKILL_HEADER
                  ) -> tuple[str, dict]:
    """One Trace2Skill pass over `episodes` (successes and failures analysed, the lessons
    consolidated into `skill`): (SKILL.md, a record of the pass)."""
    lessons, raw = analyse(writer, episodes, prompts, limits)
    rules = consolidate(writer, skill_rules(skill), [x["lesson"] for x in lessons], prompts,
                        limits)
    text = render_skill(rules, limits)
    return text, {"episodes": len(episodes),
                  "success": sum(bool(e["success"]) for e in episodes) / max(1, len(episodes)),
                  "analysed": len(raw), "lessons": lessons, "raw": raw,
                  "rules": skill_rules(text), "skill_chars": len(text)}


def trace2skill(writer, play: Callable[[str, int], Sequence[dict]], iterations: int,
                prompts: SkillPrompts = GENERIC, limits: SkillLimits = SkillLimits()
                ) -> tuple[str, list[dict]]:
    """The Trace2Skill baseline's loop: iteration i plays with the current SKILL.md
    (`play(skill, i)` -> episode dicts), analyses those trajectories and consolidates the
    lessons into the SKILL.md; (the final SKILL.md, one record per iteration)."""
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    skill, history = SKILL_HEADER, []
    for i in range(iterations):
        skill, record = distill_skill(writer, play(skill, i), prompts, limits, skill)
        history.append({"iteration": i, **record})
    return skill, history
