"""Trace2Skill: selection of failed trajectories and the bounded, deduplicated SKILL.md."""

from esopt.context.skills import (
    SKILL_HEADER,
    clean_lesson,
    distill_skill,
    failed_trajectories,
    merge_lessons,
)


def episode(pid, success, text="tried"):
    return {"problem_id": pid, "question": f"q{pid}", "gold": "1", "success": success,
            "transcript": text}


def test_at_most_one_failed_trajectory_per_problem():
    eps = [episode("a", False, "1"), episode("a", False, "2"), episode("b", True),
           episode("c", False, "3"), episode("b", False, "4")]
    assert [e["transcript"] for e in failed_trajectories(eps)] == ["1", "3", "4"]


def test_lessons_are_cleaned_deduplicated_and_bounded():
    assert clean_lesson("\n- Lesson: Always print the final value.\nmore") == \
        "Always print the final value."
    assert clean_lesson("ok") is None
    skill = merge_lessons(["Always print intermediate values in the tool.",
                           "always print the intermediate values in the tool",
                           "Check the answer format before answering.", "x" * 50],
                          max_chars=len(SKILL_HEADER) + 100)
    assert skill.count("- ") == 2 and len(skill) <= len(SKILL_HEADER) + 100
    assert "Check the answer format" in skill


def test_distill_with_a_real_policy(tiny_policy):
    eps = [episode("a", False), episode("b", False), episode("c", True)]
    skill, raw = distill_skill(tiny_policy, eps)
    assert len(raw) == 2 and skill.startswith(SKILL_HEADER)
    assert distill_skill(tiny_policy, [episode("c", True)]) == (SKILL_HEADER, [])
