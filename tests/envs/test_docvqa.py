"""DocVQA with an OCR tool: ANLS on hand-computed cases, the synthetic pages and the Hub
field mapping (local records, no download), the command shell, and episodes through the
real sandbox and OCR (a few pages: OCR costs ~3-10 s a page on a loaded 2-core machine;
later tests reuse the OCR cache)."""

import io
import os

import pytest
from PIL import Image

from esopt.data.docs import (
    DocTask,
    from_hub_records,
    hub_source,
    image_name,
    load_docs,
    page_text,
    synthetic_tasks,
)
from esopt.envs import make_env, registered
from esopt.envs.anls import anls, exact_match
from esopt.envs.docvqa import extract_final_answer, oracle_answer, oracle_policy, tool_call
from esopt.runtime.sandbox import run_sandboxed
from esopt.tools.shell import run_script

pytest.importorskip("rapidocr")
pytest.importorskip("anls")


# --- ANLS ---------------------------------------------------------------------------

@pytest.mark.parametrize("pred, golds, expected", [
    ("New York", ["new york"], 1.0),                      # case
    ("  new   york \n", ["New York"], 1.0),               # outer and inner whitespace
    ("$12.5O", ["$12.50"], 1 - 1 / 6),                    # one substitution in six
    ("abc", ["abx"], 1 - 1 / 3),                          # NL 1/3 < 0.5: kept
    ("ab", ["ax"], 0.0),                                  # NL exactly 0.5: zeroed (NL >= tau)
    ("abcd", ["abxy"], 0.0),                              # NL 0.5 again, longer strings
    ("abcdefg", ["abcxxxx"], 0.0),                        # NL 4/7 > 0.5
    ("abcdefgh", ["abcdexxx"], 1 - 3 / 8),                # NL 3/8: 0.625
    ("Jon Smith", ["John Smith", "J. Smith"], 0.9),       # max over golds: 1 - 1/10
    ("1234.50", ["$1,234.50", "1234.50"], 1.0),           # any gold may match exactly
    ("12", ["$1,234.50", "1234.50"], 0.0),                # all below the threshold
    ("", ["abc"], 0.0),
    ("", [""], 1.0),
    ("July", "July", 1.0),                                # a bare string is one gold
])
def test_anls_equals_hand_computed_values(pred, golds, expected):
    assert anls(pred, golds) == pytest.approx(expected)


def test_anls_needs_gold_answers_and_exact_match_normalises_like_anls():
    with pytest.raises(ValueError, match="no gold"):
        anls("x", [])
    assert exact_match(" NEW  york", ["x", "New York"])
    assert not exact_match("New Yorks", ["New York"])


# --- data -----------------------------------------------------------------------------

def test_synthetic_pages_are_seeded_and_answers_are_printed_on_them():
    a, b = synthetic_tasks(12, seed=3), synthetic_tasks(12, seed=3)
    assert a == b and a != synthetic_tasks(12, seed=4)
    assert {t.doc_type for t in a} == {"invoice", "receipt", "form", "letter"}
    for i, t in enumerate(a):
        assert t.answers and t.answers[0] in page_text(i, seed=3), (t.question, t.answers)
        img = Image.open(io.BytesIO(t.image))
        assert img.format == "PNG" and img.size == (900, 1000)
    assert load_docs("synthetic:3:3") == a[:3]


def _jpeg(color="white", size=(40, 20), text="") -> bytes:
    from PIL import ImageDraw, ImageFont

    img = Image.new("RGB", size, color)
    if text:
        ImageDraw.Draw(img).text((20, 20), text, font=ImageFont.load_default(size=24),
                                 fill="black")
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def test_hub_records_map_to_doc_tasks():
    # The Hub's DocVQA fields (lmms-lab/DocVQA, config DocVQA, split validation).
    records = [
        {"questionId": 337, "question": " what is the date mentioned? ",
         "question_types": ["handwritten"], "docId": 279, "ucsf_document_id": "xnbl0037",
         "ucsf_document_page_no": "1", "answers": ["March 11, 1969", "11 March 1969"],
         "data_split": "val", "image": Image.open(io.BytesIO(_jpeg()))},
        {"questionId": 338, "question": "Whose name?", "answers": ["J. Doe"],
         "image": {"bytes": _jpeg("gray"), "path": None}},
    ]
    tasks = from_hub_records(records)
    assert [t.id for t in tasks] == ["docvqa:337", "docvqa:338"]
    assert tasks[0].question == "what is the date mentioned?" and tasks[0].doc_type == "xnbl0037"
    assert tasks[0].answers == ("March 11, 1969", "11 March 1969")
    # A decoded image is stored as PNG; encoded bytes (the loader asks for them) as they are.
    assert Image.open(io.BytesIO(tasks[0].image)).format == "PNG"
    assert tasks[1].image == records[1]["image"]["bytes"]
    assert [image_name(t.image) for t in tasks] == ["page.png", "page.jpg"]
    with pytest.raises(ValueError, match="needs"):
        from_hub_records([{"question": "q", "answers": ["a"]}])
    with pytest.raises(ValueError, match="no gold"):
        from_hub_records([{"question": "q", "answers": [], "image": _jpeg()}])


def _fake_datasets(monkeypatch, records):
    """A stand-in `datasets` module whose load_dataset returns `records` (no network)."""
    import sys
    import types

    calls = []

    def load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        return records

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    return calls


def test_hub_loader_asks_for_docvqa_validation_and_samples_by_seed(monkeypatch):
    records = [{"questionId": i, "question": f"q{i}?", "answers": [f"a{i}"], "image": _jpeg()}
               for i in range(10)]
    calls = _fake_datasets(monkeypatch, records)
    tasks = load_docs("lmms-lab/DocVQA::4")
    assert calls == [(("lmms-lab/DocVQA", "DocVQA"), {"split": "validation"})]
    assert len(tasks) == 4 and tasks == load_docs("lmms-lab/DocVQA:validation:4")
    assert all(t.answers == (f"a{t.id.split(':')[1]}",) for t in tasks)


def test_hub_source_passes_a_sliced_split_to_datasets_and_refuses_malformed_ones(monkeypatch):
    records = [{"questionId": i, "question": f"q{i}?", "answers": [f"a{i}"], "image": _jpeg()}
               for i in range(6)]
    calls = _fake_datasets(monkeypatch, records)
    assert len(load_docs("lmms-lab/DocVQA:validation[:1000]:3")) == 3
    load_docs("lmms-lab/DocVQA:validation[1000:]")
    assert [c[1]["split"] for c in calls] == ["validation[:1000]", "validation[1000:]"]
    assert hub_source("lmms-lab/DocVQA") == ("lmms-lab/DocVQA", "validation", None)
    for bad in ("lmms-lab/DocVQA:validation:4:9", "lmms-lab/DocVQA:validation[1:",
                "lmms-lab/DocVQA:validation:four"):
        with pytest.raises(ValueError, match="DATASET_ID"):
            load_docs(bad)


def test_paper_scale_evaluates_no_training_record():
    """docvqa-paper trains on a sample of one slice of the validation split and evaluates on
    the records after it (they overlapped when both read the whole split)."""
    import re
    from pathlib import Path

    import yaml

    scale = yaml.safe_load((Path(__file__).parents[2] / "config/scales/docvqa-paper.yaml")
                           .read_text())["docvqa"]
    train = hub_source(scale["env_options"]["data"])
    held_out = hub_source(scale["eval"]["env_options"]["data"])
    assert train[0] == held_out[0]
    (split, end), = re.findall(r"^(\w+)\[:(\d+)\]$", train[1])
    (split2, start), = re.findall(r"^(\w+)\[(\d+):\]$", held_out[1])
    assert split == split2 and int(end) <= int(start)


# --- the command shell (the trusted harness itself, on a cached OCR text) -------------

def test_shell_commands_pipes_and_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "page.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    import hashlib

    key = hashlib.sha256((tmp_path / "page.png").read_bytes()).hexdigest()
    cache = {key: "INVOICE\nDate: May 3, 2017\nStapler  3  $4.50  $13.50\nTotal: $13.50"}
    out, new, failures = run_script("ocr page.png | grep -i total && ls\n"
                                    "tesseract page.png stdout | head -n 2 | tail -1", cache)
    assert out == "Total: $13.50\npage.png\nDate: May 3, 2017" and new == {} and failures == 0
    out, _, failures = run_script("cat /etc/passwd; rm -rf /; cat page.png; ocr page.png > x;"
                                  " echo $(id); grep ( page.png", cache)
    assert failures == 6, out
    assert "permission denied" in out and "rm: command not found" in out
    assert "binary file" in out and "not supported" in out and "bad pattern" in out
    assert not (tmp_path / "x").exists()


def test_pipes_and_separators_inside_quotes_are_arguments(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "page.txt").write_text("Total: 5\nTax: 1\nAmount due: 7\n")
    out, _, failures = run_script("grep -E 'Total|Amount' page.txt; echo 'a;b && c|d'\n"
                                  "grep -c \"Tax|Total\" page.txt | cat; grep 'x>y' page.txt")
    assert failures == 0 and out == "Total: 5\nAmount due: 7\na;b && c|d\n2", out
    out, _, failures = run_script("cat page.txt > copy.txt")
    assert failures == 1 and "not supported" in out and not (tmp_path / "copy.txt").exists()


def test_the_shell_runs_in_the_jail_on_the_page_alone(tmp_path):
    # No untrusted Python: the harness itself runs in the jail, the page its only file.
    result = run_sandboxed("", "esopt.tools.shell:run_commands",
                           {"script": f"ls; pwd; cat {tmp_path}/x; grep -E 'a|b' notes.txt"},
                           files={"notes.txt": b"a\nc\nb\n"})
    assert result.ok and result.mode == "isolated", result
    assert result.value["output"].splitlines()[:4] == ["notes.txt", "/job", f"cat: {tmp_path}/x: "
                                                       "permission denied (outside the working "
                                                       "directory)", "a"]


def test_sandbox_files_must_be_plain_names():
    with pytest.raises(ValueError, match="plain file name"):
        run_sandboxed("", "esopt.tools.shell:run_commands", {"script": "ls"},
                      files={"../escape.png": b""})


def test_completion_parsing():
    assert tool_call("I'll look.\n```bash\nocr page.png\n```") == "ocr page.png\n"
    assert tool_call("```sh\nls") == "ls\n" and tool_call("```python\nprint(1)\n```") is None
    assert extract_final_answer("so...\nFinal Answer: **$13.50**.") == "$13.50"
    assert extract_final_answer("final answer: a\nFinal answer: b") == "b"
    assert extract_final_answer("Answer: 3") is None


def test_oracle_rule_on_ocr_like_text():
    text = "INVOICE\nInvoice No: INV-4417\nStapler  3  $4.50  $13.50\nTotal: $13.50"
    assert oracle_answer("What is the Invoice No?", text) == "INV-4417"
    assert oracle_answer("What is the quantity of Stapler?", text) == "3"
    assert oracle_answer("What is the amount for Stapler?", text) == "$13.50"
    assert oracle_answer("What is the Total?", text) == "$13.50"


# --- episodes: the real sandbox and OCR -------------------------------------------------

DATA = "synthetic:24:0"
# Three pages whose questions cover a field, a table quantity and a table amount.
ORACLE_PAGES = (0, 1, 4)


def env(**options):
    return make_env("docvqa", data=DATA, **options)


@pytest.fixture(scope="module")
def page_ocr_cached():
    """OCR the first oracle page once with the default limits (a no-op when cached), so
    that tests with tight tool limits only pay for the cached, light tool call."""
    e = env()
    e.reset(ORACLE_PAGES[0])
    assert e.step("```bash\nocr page.png\n```").info["tool_outcomes"] == ["ok"]


def test_docvqa_is_registered():
    assert "docvqa" in registered()


def test_evaluation_takes_each_document_once_when_tasks_exceed_the_data():
    from esopt.pipeline.stages import eval_tasks

    assert make_env("docvqa", data="synthetic:3:0").num_tasks == 3
    assert eval_tasks("docvqa", {"data": "synthetic:3:0"}, 5) == [0, 1, 2]


def test_oracle_scores_anls_above_0_8():
    e, scores = env(), []
    for seed in ORACLE_PAGES:
        obs = e.reset(seed)
        r = e.step(oracle_policy(obs))
        assert not r.done and r.info["tool_outcomes"] == ["ok"], r.observation[-1]
        r = e.step(oracle_policy(r.observation))
        assert r.done and r.reward == r.info["anls"]
        scores.append(r.reward)
    assert {e.tasks[s].kind for s in ORACLE_PAGES} == {"field", "qty", "amount"}
    assert sum(scores) / len(scores) > 0.8, scores


def test_reward_is_zero_without_a_tool_use():
    e = env()
    e.reset(ORACLE_PAGES[0])
    r = e.step(f"Final answer: {e.task.answers[0]}")
    assert r.done and r.reward == 0.0 and not e.success
    assert r.info["anls"] == 0.0 and r.info["answer_anls"] == 1.0
    assert r.info["answer_accuracy"] == 1.0 and r.info["accuracy"] == 0.0


@pytest.mark.parametrize("script, outcome, says", [
    ("cat /etc/passwd", "ok", "permission denied"),
    ("ocr ../../../etc/hostname", "ok", "permission denied"),
    ("rm -rf / ; python -c 'import os'", "ok", "command not found"),
    (":(){ :|:& };:", "ok", "not supported"),
    ("ocr page.png > /tmp/escape.txt", "ok", "not supported"),
    ("echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa! | grep -E '(a*)*b'", "timeout", "timeout"),
    ("cat page.png", "ok", "binary file"),
])
def test_hostile_tool_calls_come_back_as_errors_and_the_episode_goes_on(script, outcome, says,
                                                                       page_ocr_cached):
    e = env(max_turns=3, tool_wall_s=3, tool_cpu_s=2)
    obs = e.reset(ORACLE_PAGES[0])
    r = e.step(f"```bash\n{script}\n```")
    assert not r.done and r.info["tool_outcomes"] == [outcome]
    assert says in r.observation[-1]["content"]
    assert not os.path.exists("/tmp/escape.txt")
    r = e.step(oracle_policy(obs))  # the page is still there and OCR still works (cached)
    r = e.step(oracle_policy(r.observation))
    assert r.done and r.reward == 1.0 and e.success


def test_the_history_keeps_the_block_and_drops_what_follows_it(page_ocr_cached):
    e = env()
    e.reset(ORACLE_PAGES[0])
    r = e.step("Look.\n```bash\nls\n```\nFinal answer: guess")
    assert r.observation[-2]["content"] == "Look.\n```bash\nls\n```" and not r.done
    r = e.step("```bash\nls")  # cut off before its closing fence: kept whole
    assert r.observation[-2]["content"] == "```bash\nls"
    assert r.observation[-1]["content"] == "```output\npage.png\n```"


def test_turn_limit_ends_an_unanswered_episode():
    e = env(max_turns=2)
    e.reset(2)
    assert not e.step("hmm").done
    r = e.step("still thinking")
    assert r.done and r.reward == 0 and r.info["anls"] == 0.0 and not e.success


def test_doc_task_records_are_hashable_values():
    t = DocTask("x", b"png", "q?", ("a",))
    assert t == DocTask("x", b"png", "q?", ("a",)) and hash(t)


def test_an_ocr_that_runs_out_of_time_is_a_timeout_and_the_episode_goes_on():
    e = env(max_turns=2, tool_wall_s=1, tool_cpu_s=1, ocr_s=0, ocr_cache=False)
    e.reset(ORACLE_PAGES[0])
    r = e.step("```bash\nocr page.png\n```")
    assert not r.done and r.info["tool_outcomes"] == ["timeout"]
    assert r.observation[-1]["content"].startswith("```output\nError (timeout)")
    r = e.step(f"Final answer: {e.task.answers[0]}")  # a failed call is still a tool use
    assert r.done and r.reward == 1.0


def test_the_rollout_engine_plays_docvqa_episodes_with_the_oracle():
    from esopt.agent.rollout import run_episodes
    from esopt.chat import Completion, SamplingParams

    class Oracle:
        def generate(self, conversations, sampling):
            assert "```output" in sampling.stop
            return [Completion(oracle_policy(c), 10, 10, "stop") for c in conversations]

    episodes = run_episodes(Oracle(), env, ORACLE_PAGES[:2], SamplingParams(max_new_tokens=64))
    assert [ep.num_turns for ep in episodes] == [2, 2] and not any(ep.failed for ep in episodes)
    assert all(ep.success and ep.reward == 1.0 for ep in episodes)


def test_a_hub_scan_is_page_jpg_in_the_sandbox(monkeypatch):
    import hashlib

    from esopt.envs.docvqa import remember_ocr

    scan = _jpeg(size=(420, 80), text="Total: $5.00")
    _fake_datasets(monkeypatch, [{"questionId": 7, "question": "What is the Total?",
                                  "answers": ["$5.00", "5.00"], "image": {"bytes": scan}}])
    # Its OCR text is cached (real OCR is the oracle test's), so the call stays light.
    remember_ocr({hashlib.sha256(scan).hexdigest(): "Total: $5.00"})
    e = make_env("docvqa", data="lmms-lab/DocVQA:validation:1")
    obs = e.reset(0)
    assert obs[-1]["content"].startswith("Document: page.jpg\n")
    r = e.step("```bash\nls; cat page.jpg\n```")
    assert r.observation[-1]["content"] == ("```output\npage.jpg\ncat: page.jpg: binary file "
                                            "(an image: use `ocr page.jpg`)\n```")
    r = e.step(oracle_policy(obs))
    assert r.info["tool_outcomes"] == ["ok", "ok"]
    assert e.step(oracle_policy(r.observation)).reward == 1.0


# --- issue 37: short pages and the worked example --------------------------------------

def test_short_pages_ask_a_labelled_value_printed_after_its_label():
    from esopt.data.docs import SHORT_FIELDS

    tasks = synthetic_tasks(12, seed=3, layout="short")
    assert tasks == load_docs("synthetic:12:3", layout="short")
    assert [t.image for t in tasks] != [t.image for t in synthetic_tasks(12, seed=3)]
    for i, t in enumerate(tasks):
        lines = page_text(i, seed=3, layout="short").splitlines()
        fields = lines[1:-1]  # between the title and the closing line
        assert len(fields) == SHORT_FIELDS and all(": " in f for f in fields), lines
        assert t.kind == "field" and f"{t.label}: {t.answers[0]}" in fields, (t, lines)
        assert t.id == f"syn-short3:{i}"
    assert {t.doc_type for t in tasks} == {"invoice", "receipt", "form", "letter"}
    with pytest.raises(ValueError, match="layout must be one of"):
        make_env("docvqa", data="synthetic:2:0", layout="tiny")
    with pytest.raises(ValueError, match="for synthetic pages"):
        load_docs("lmms-lab/DocVQA:validation:4", layout="short")  # before any download


def test_a_short_page_with_the_example_is_solved_by_copying_its_value():
    """One episode through the real sandbox and OCR: the example sits before the task's
    question, the oracle reads the task's page (not the example's), and only the asked
    field's value scores."""
    from esopt.envs.docvqa import EXAMPLE

    e = make_env("docvqa", data="synthetic:2:5", layout="short", example=True)
    obs = e.reset(0)
    assert obs[1:5] == list(EXAMPLE) and obs[-1]["content"] == (
        f"Document: page.png\nQuestion: {e.task.question}")
    r = e.step(oracle_policy(obs))
    assert r.info["tool_outcomes"] == ["ok"] and not r.done
    r = e.step(oracle_policy(r.observation))
    assert r.done and r.reward == 1.0 and e.success, (e.task, r.info)
    other = next(ln.split(": ", 1)[1] for ln in page_text(0, seed=5, layout="short")
                 .splitlines()[1:-1] if not ln.startswith(f"{e.task.label}: "))
    e.reset(0)
    e.step("```bash\nocr page.png\n```")  # cached now
    r = e.step(f"Final answer: {other}")
    assert r.done and r.reward == 0.0 and not e.success
    with pytest.raises(ValueError, match="example must be true or false"):
        make_env("docvqa", data="synthetic:2:5", example="yes")
