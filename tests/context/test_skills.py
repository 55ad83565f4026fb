"""Trace2Skill: per-environment prompts, successes and failures analysed, hierarchical
consolidation into a bounded SKILL.md, and the baseline's iterations (issue 36, item 2).

The writer is the real tiny model; `Recording` only keeps the prompts it was sent."""

import pytest

from esopt.context.skills import (
    PROMPTS,
    SKILL_HEADER,
    SkillLimits,
    analyse,
    clean_lesson,
    consolidate,
    dedupe,
    distill_skill,
    parse_rules,
    prompts_for,
    render_skill,
    select_trajectories,
    skill_rules,
    trace2skill,
)


class Recording:
    """A real policy whose prompts are kept (the writer's replies are the model's own)."""

    def __init__(self, policy):
        self.policy, self.prompts = policy, []

    def generate(self, conversations, sampling):
        self.prompts += [c[0]["content"] for c in conversations]
        return self.policy.generate(conversations, sampling)


def episode(pid, success, text="tried"):
    return {"problem_id": pid, "question": f"q{pid}", "gold": "1", "success": success,
            "transcript": text}


def test_each_environment_has_its_own_prompts():
    """The web and DocVQA lessons are not asked for with the math prompt (the old
    LESSON_PROMPT, 'solve a math problem with a Python tool', served every environment)."""
    assert {"math_tool", "web", "docvqa"} <= set(PROMPTS)
    web, doc, math = prompts_for("web"), prompts_for("docvqa"), prompts_for("math_tool")
    for p in (web, doc):
        for template in (p.success, p.failure, p.consolidate):
            assert "math" not in template.lower() and "python" not in template.lower()
    assert "browser actions" in web.failure and "OCR" in doc.failure
    assert "Python" in math.failure and "{gold}" in math.failure
    assert prompts_for("sudoku").failure != math.failure  # a generic set elsewhere


def test_successes_and_failures_are_both_analysed(tiny_policy):
    eps = [episode("a", False, "1"), episode("a", False, "2"), episode("a", True, "3"),
           episode("b", True, "4"), episode("b", True, "5"), episode("c", False, "6")]
    assert [e["transcript"] for e in select_trajectories(eps)] == ["1", "3", "4", "6"]
    writer = Recording(tiny_policy)
    lessons, raw = analyse(writer, eps, prompts_for("web"))
    assert len(raw) == 4 and len(writer.prompts) == 4
    succeeded = [p for p in writer.prompts if "completed the task" in p]
    failed = [p for p in writer.prompts if "failed the task" in p]
    assert len(succeeded) == 2 and len(failed) == 2
    assert all("web agent" in p for p in writer.prompts)
    assert {(x["problem_id"], x["success"]) for x in lessons} <= {
        ("a", False), ("a", True), ("b", True), ("c", False)}


def test_rules_are_parsed_deduplicated_and_bounded():
    assert clean_lesson("\n- Lesson: Always print the final value.\nmore") == \
        "Always print the final value."
    assert clean_lesson("ok") is None
    assert parse_rules("- one two three\n* Rule: four five six\nok\n2) seven eight nine") == [
        "one two three", "four five six", "seven eight nine"]
    assert dedupe(["Always print intermediate values in the tool.",
                   "always print the intermediate values in the tool",
                   "Check the answer format before answering."]) == [
        "Always print intermediate values in the tool.",
        "Check the answer format before answering."]
    rules = [f"rule number {i} says something" for i in range(20)]
    skill = render_skill(rules, SkillLimits(max_rules=5, max_chars=2000))
    assert skill.startswith(SKILL_HEADER) and skill_rules(skill) == rules[:5]
    short = render_skill(rules, SkillLimits(max_rules=20, max_chars=150))
    assert len(short) <= 150 and 1 <= len(skill_rules(short)) < 5


def test_consolidation_is_hierarchical_and_bounded(tiny_policy):
    """5 lessons, groups of 2: 3 group merges, then pairwise 3 -> 2 -> 1 (2 merges), then
    one into the current rules: 6 writer calls; the result at most max_rules rules."""
    writer = Recording(tiny_policy)
    limits = SkillLimits(max_rules=3, merge_batch=2, rule_tokens=8)
    lessons = ["print every intermediate value", "check the units before answering",
               "run the code once more after an error", "read the question twice first",
               "end with one answer line only"]
    rules = consolidate(writer, ["an existing rule stays here"], lessons, prompts_for("math_tool"),
                        limits)
    assert len(writer.prompts) == 6
    assert 1 <= len(rules) <= 3
    assert "an existing rule stays here" in writer.prompts[-1]  # the last merge: the skill
    assert all("at most 3" in p for p in writer.prompts)


def test_a_reply_without_rules_falls_back_to_the_lessons(tiny_policy):
    """A writer that says nothing usable (one token) leaves a deterministic merge."""
    limits = SkillLimits(max_rules=4, rule_tokens=1, lesson_tokens=1)
    rules = consolidate(tiny_policy, ["keep this first rule"],
                        ["and add this second lesson", "and add this second lesson"],
                        prompts_for("docvqa"), SkillLimits(max_rules=4, rule_tokens=1))
    assert rules == ["keep this first rule", "and add this second lesson"]
    skill, record = distill_skill(tiny_policy, [episode("c", True)], prompts_for("math_tool"),
                                  limits)
    assert skill.startswith(SKILL_HEADER) and record["analysed"] == 1
    assert distill_skill(tiny_policy, [], prompts_for("math_tool"))[0] == SKILL_HEADER


def test_trace2skill_iterates_playing_with_the_current_skill(tiny_policy):
    """Iteration i plays with the SKILL.md the previous one left; one record each."""
    seen = []

    def play(skill, iteration):
        seen.append(skill)
        return [episode(f"p{iteration}", k % 2 == 0, f"attempt {k}") for k in range(4)]

    limits = SkillLimits(max_rules=4, rule_tokens=12, lesson_tokens=24)
    skill, history = trace2skill(tiny_policy, play, 3, prompts_for("math_tool"), limits)
    assert [h["iteration"] for h in history] == [0, 1, 2] and len(seen) == 3
    assert seen[0] == SKILL_HEADER
    assert seen[1] == render_skill(history[0]["rules"], limits)
    assert seen[2] == render_skill(history[1]["rules"], limits)
    assert skill == render_skill(history[2]["rules"], limits)
    assert all(h["episodes"] == 4 and h["success"] == 0.5 and h["analysed"] == 2
               for h in history)
    with pytest.raises(ValueError, match="iterations"):
        trace2skill(tiny_policy, play, 0)
