"""The math tool environment: the episode and the sandboxed tool on generated problems
(always run), the loaders on the shared DAPO/AIME files (read by path, never copied; those
tests alone skip where the files are absent)."""

import json
import os
from pathlib import Path

import pytest

from esopt.data.math import from_records, load_jsonl
from esopt.envs import make_env

# The shared data sit beside the repository (../shared/data); ESOPT_SHARED_DATA moves them.
DATA = Path(os.environ.get("ESOPT_SHARED_DATA",
                           Path(__file__).resolve().parents[3] / "shared" / "data")) / "math"
needs_data = pytest.mark.skipif(not DATA.exists(), reason=f"needs {DATA}")


@needs_data
def test_loaders_read_the_shared_files():
    dapo, aime = load_jsonl(DATA / "dapo_test.jsonl"), load_jsonl(DATA / "aime_2026.jsonl")
    assert len(dapo) == 100 and len(aime) == 30
    assert all(p.question and p.answer for p in dapo + aime)
    # The dataset-id path maps the Hub's own fields to the same records.
    hub_like = [{"prompt": [{"role": "user", "content": "1+1?"}],
                 "reward_model": {"ground_truth": "2", "style": "rule"}}]
    assert from_records(hub_like, "prompt", "reward_model")[0].answer == "2"
    with pytest.raises(ValueError, match="needs 'question'"):
        from_records([{"q": 1}])


def env(**options):
    # Generated problems: the environment and the sandbox do not depend on the shared data.
    return make_env("math_tool", data="generated:8:0", **options)


@needs_data
def test_an_episode_on_the_shared_file_is_solved_by_its_gold_answer():
    e = make_env("math_tool", data=str(DATA / "dapo_test.jsonl"), require_tool=False)
    for i in range(3):
        e.reset(i)
        assert e.problem.answer and e.step(f"Answer: {e.problem.answer}").reward == 1.0


def test_tool_call_then_answer_solves_the_episode():
    e = env()
    e.reset(0)
    gold = e.problem.answer
    r = e.step(f"Compute.\n```python\nprint({gold} + 0)\n```")
    assert not r.done and r.observation[-1]["content"] == f"```output\n{gold}\n```"
    r = e.step(f"The tool agrees.\nAnswer: {gold}")
    assert r.done and r.reward == 1.0 and e.success
    assert r.info["tool_calls"] == 1 and r.info["decided_by"] in ("string", "math_verify")


def test_the_history_keeps_the_block_and_drops_what_follows_it():
    e = env()
    e.reset(0)
    r = e.step("Look.\n```python\nprint(1)\n```\nAnswer: 7")
    assert r.observation[-2]["content"] == "Look.\n```python\nprint(1)\n```" and not r.done
    r = e.step("```python\nprint(2)\n")  # cut off before its closing fence: kept whole
    assert r.observation[-2]["content"] == "```python\nprint(2)\n"
    assert r.observation[-1]["content"] == "```output\n2\n```"


def test_answer_before_a_tool_call_is_refused_when_required():
    e = env(require_tool=True)
    e.reset(0)
    r = e.step(f"Answer: {e.problem.answer}")
    assert not r.done and r.reward == 0 and r.info["refused"]
    e2 = env(require_tool=False)
    e2.reset(0)
    assert e2.step(f"Answer: {e2.problem.answer}").reward == 1.0


@pytest.mark.parametrize("code, outcome", [
    ("while True:\n    pass", "timeout"),
    ("x = [0] * 10**10", "memory"),
    ("import numpy as np\nx = [np.empty(10**8) for _ in range(100)]", "memory"),
    ("import os\nos.fork()", "forbidden"),
    ("import socket\nsocket.create_connection(('1.1.1.1', 80))", "forbidden"),
    ("open('/tmp/escape.txt', 'w').write('x')", "forbidden"),
    ("1/0", "exception"),
])
def test_hostile_tool_calls_come_back_as_errors_and_the_episode_goes_on(code, outcome):
    e = env(max_turns=3, tool_cpu_s=2)
    e.reset(1)
    r = e.step(f"```python\n{code}\n```")
    assert not r.done and r.info["tool_outcomes"] == [outcome]
    assert r.observation[-1]["content"].startswith(f"```output\nError ({outcome})")
    assert e.step(f"Answer: {e.problem.answer}").reward == 1.0


def test_turn_limit_ends_a_wrong_episode():
    e = env(max_turns=2)
    e.reset(2)
    assert not e.step("hmm").done
    r = e.step("still thinking")
    assert r.done and r.reward == 0 and not e.success


class _Policy:
    """Answers 'Compute ...' problems as an unreduced fraction, gives up on the others
    (on all of them when silent)."""

    def __init__(self, silent=False):
        self.silent = silent

    def generate(self, conversations, sampling):
        import re

        from esopt.chat import Completion

        out = []
        for c in conversations:
            m = re.match(r"Compute (\d+) \* (\d+) \+ (\d+)\.", c[-1]["content"])
            text = (f"Answer: \\frac{{{2 * (int(m[1]) * int(m[2]) + int(m[3]))}}}{{2}}"
                    if m and not self.silent else "I do not know.")
            out.append(Completion(text, 10, 3, "stop"))
        return out


def test_evaluation_data_say_which_checker_decided():
    from esopt.agent.evaluate import evaluate
    from esopt.chat import SamplingParams

    options = {"data": "generated:8:0", "require_tool": False, "max_turns": 1}
    table, _ = evaluate(_Policy(), "math_tool", options, list(range(8)), 2, SamplingParams())
    rows = table.select(["task_seed", "success", "decided_by"]).to_pylist()
    assert table.schema.field("decided_by").type == "string"
    answered = [r for r in rows if r["decided_by"] is not None]
    # math-verify judged every answer (all correct); unanswered episodes have no checker.
    assert answered and all(r["decided_by"] == "math_verify" and r["success"] for r in answered)
    assert all(not r["success"] for r in rows if r["decided_by"] is None)
    assert len(answered) < len(rows)
    # Typed even where no episode answered, so such a table concatenates with others.
    table, _ = evaluate(_Policy(silent=True), "math_tool", options, [0, 1], 1,
                        SamplingParams())
    assert table.column("decided_by").to_pylist() == [None, None]
    assert table.schema.field("decided_by").type == "string"


def test_the_tool_cannot_read_its_datasets_answers(tmp_path, monkeypatch):
    # The dataset lies on disk beside the run, its path known to the attacker: the tool's
    # code searches it, the parent's environment and memory-like places, and answers with
    # whatever it found. A reward that code can read is not a reward.
    gold = "7391.25"
    data = tmp_path / "secret_math.jsonl"
    data.write_text(json.dumps({"id": "p0", "question": "What is x?", "answer": gold}) + "\n")
    monkeypatch.setenv("ESOPT_MATH_DATA", str(data))
    e = make_env("math_tool", data=str(data))
    e.reset(0)
    attack = (
        "```python\n"
        "import os, glob\n"
        "found = []\n"
        f"paths = [{str(data)!r}] + glob.glob('/tmp/**/*.jsonl', recursive=True)"
        " + glob.glob('/work/**/*.jsonl', recursive=True)"
        " + glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline')\n"
        "for p in paths:\n"
        "    try:\n"
        "        found.append(open(p, errors='replace').read())\n"
        "    except OSError as e:\n"
        "        found.append(type(e).__name__)\n"
        "import re\n"
        "nums = re.findall(r'answer.: .([0-9.]+)', ' '.join(found) + repr(dict(os.environ)))\n"
        "print('ANSWER', nums[0] if nums else 'none', found[0])\n"
        "```"
    )
    step = e.step(attack)
    tool_output = step.observation[-1]["content"]
    assert gold not in tool_output and "ANSWER none FileNotFoundError" in tool_output
    assert e.tool_outcomes == ["ok"]
    final = e.step(f"Answer: {tool_output.split('ANSWER ')[1].split()[0]}")
    assert final.reward == 0.0 and final.done


def test_the_worked_example_comes_before_the_problem_and_scores_nothing_itself():
    """Option `example` (issue 37's tiny scale): the solved exchange sits between the system
    prompt and the problem, every episode; the episode is scored on the problem alone."""
    from esopt.envs.math_tool import EXAMPLE

    plain, shown = env().reset(3), env(example=True).reset(3)
    assert shown == [plain[0], *EXAMPLE, plain[1]] and len(EXAMPLE) == 4
    assert [m["role"] for m in shown] == ["system", "user", "assistant", "user", "assistant",
                                          "user"]
    e = env(example=True)
    e.reset(3)
    gold = e.problem.answer
    assert gold != "89"
    r = e.step(f"```python\nprint({gold})\n```")
    assert r.observation[:6] == shown and not r.done
    assert e.step(f"Answer: {gold}").reward == 1.0
    e.reset(3)
    e.step("```python\nprint(89)\n```")
    r = e.step("Answer: 89")  # the example's answer, copied
    assert r.done and r.reward == 0.0 and not e.success
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="example must be true or false"):
            env(example=bad)
