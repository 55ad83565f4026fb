"""Real WebArena tasks: the config loader (placeholders, evaluators, refusals), the
program_html and fuzzy_match checks, and the environment in WebArena mode, here pointed
at the local sites standing in for a deployment."""

import json

import pytest

from esopt.envs import make_env
from esopt.web import server as web_server
from esopt.web.agents import find_element
from esopt.web.checks import passes
from esopt.web.server import SiteServer
from esopt.web.sites import site_module
from esopt.web.task import Check
from esopt.web.webarena import load_judge, load_webarena_tasks, task_from_config

pytest.importorskip("flask")


def judge_says_bob(intent, answer, references):
    """A judge hook for the tests: the answer means the reference when both name bob."""
    return "bob" in answer.lower() and any("bob" in r.lower() for r in references)


def config(task_id, eval_types, start="__REDDIT__/", **ev):
    return {"task_id": task_id, "sites": ["reddit"], "start_url": start,
            "intent": f"task {task_id}", "eval": {"eval_types": eval_types, **ev}}


@pytest.fixture(scope="module")
def forum():
    with SiteServer("forum") as s:
        yield s


@pytest.fixture(scope="module")
def configs(forum, tmp_path_factory):
    top = max((p for p in site_module("forum").generate(0)["posts"] if p["forum"] == "books"),
              key=lambda p: p["score"])
    items = [
        config(3, ["string_match"], reference_answers={"exact_match": top["title"]}),
        config(7, ["string_match"], reference_answers={
            "must_include": ["zzz |OR| books", "f/books"]}),
        config(11, ["url_match"], reference_url="__REDDIT__/f/books"),
        config(12, ["program_html"], program_html=[{
            "url": "last", "locator": "",
            "required_contents": {"must_include": ["Thanks from WebArena"]}}]),
        config(13, ["string_match"], reference_answers={"fuzzy_match": ["Bob Smith"]}),
    ]
    path = tmp_path_factory.mktemp("webarena") / "test.raw.json"
    path.write_text(json.dumps(items))
    return path, top


def test_configs_become_tasks_with_webarenas_evaluators(forum, configs):
    path, top = configs
    tasks = load_webarena_tasks(path, {"reddit": forum.url})
    assert [t.id for t in tasks] == ["webarena/3", "webarena/7", "webarena/11", "webarena/12",
                                     "webarena/13"]
    assert {t.site for t in tasks} == {"forum"} and tasks[0].start_path == forum.url + "/"
    assert [t.check.kind for t in tasks] == ["exact_match", "must_include", "url_match",
                                             "program_html", "fuzzy_match"]
    assert tasks[2].check.reference == (forum.url + "/f/books",)
    assert tasks[3].check.url == "" and tasks[3].kind == "content"
    both = task_from_config(config(1, ["string_match", "url_match"], reference_url="__REDDIT__/x",
                                   reference_answers={"exact_match": "a"}), {"reddit": "http://h"})
    assert [c.kind for c in both.checks] == ["exact_match", "url_match"]


@pytest.mark.parametrize("bad, message", [
    (config(1, ["program_html"], program_html=[{"url": "last", "locator": "document.title",
                                                "required_contents": {"must_include": ["x"]}}]),
     "locators are not supported"),
    (config(1, ["url_match"], start="__GITLAB__/", reference_url="__GITLAB__/x"),
     "no URL for 'gitlab'"),
    (config(1, ["llm_judge_only"]), "no supported evaluator"),
])
def test_unsupported_configs_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        task_from_config(bad, {"reddit": "http://h"})


def _list_file(tmp_path, items):
    """WebArena's test.raw.json layout, one config per line: item k is on line k + 2."""
    path = tmp_path / "test.raw.json"
    path.write_text("[\n" + ",\n".join(json.dumps(c) for c in items) + "\n]\n")
    return path


GOOD = config(1, ["url_match"], reference_url="__REDDIT__/f/books")


@pytest.mark.parametrize("bad, why", [
    (config(2, ["llm_judge_only"]), "task 2: no supported evaluator in ['llm_judge_only']"),
    ({k: v for k, v in config(2, ["url_match"]).items() if k != "eval"}, "task 2: no 'eval' key"),
    ({**GOOD, "task_id": "two"}, "task_id 'two' is not an integer"),
    ([GOOD], "expected a task config (an object with task_id)"),
])
def test_a_refused_config_is_named_by_file_and_line(tmp_path, bad, why):
    # Issue 35: loader errors name the file and the line (these named neither).
    path = _list_file(tmp_path, [GOOD, GOOD, bad, GOOD])
    with pytest.raises(ValueError) as err:
        load_webarena_tasks(path, {"reddit": "http://h"})
    assert str(err.value) == f"{path}, line 4: {why}"


def test_a_config_file_that_is_not_json_is_named_by_file_and_line(tmp_path):
    path = _list_file(tmp_path, [GOOD, GOOD])
    path.write_text(path.read_text().replace('"sites"', '"sites" "x"', 1))
    with pytest.raises(ValueError, match=rf"^{path}, line 2: not JSON: Expecting ':' delimiter"):
        load_webarena_tasks(path, {"reddit": "http://h"})
    directory = tmp_path / "configs"
    directory.mkdir()
    (directory / "1.json").write_text(json.dumps(GOOD, indent=2))
    (directory / "2.json").write_bytes(b'{"task_id": 2, "intent": "caf\xe9"}')
    with pytest.raises(ValueError, match=rf"^{directory / '2.json'}, line 1: not UTF-8 text"):
        load_webarena_tasks(directory, {"reddit": "http://h"})
    (directory / "2.json").unlink()
    (task,) = load_webarena_tasks(directory, {"reddit": "http://h"})
    assert task.id == "webarena/1" and task.check.reference == ("http://h/f/books",)


def test_fuzzy_match_needs_a_judge_and_or_alternatives_count():
    check = Check("fuzzy_match", ("Bob Smith",))
    judge = load_judge("tests.web.test_webarena:judge_says_bob")
    assert passes(check, "It was bob", "", judge=judge)
    assert not passes(check, "It was alice", "", judge=judge)
    assert not passes(check, "It was bob", "")  # no judge: fails, never a silent pass
    assert passes(Check("must_include", ("x |OR| books",)), "the books", "")
    with pytest.raises(ValueError, match="module:function"):
        load_judge("no_colon")


def _act(env, obs, role, name, verb="click", text=""):
    element = find_element(obs[-1]["content"], role, name)
    assert element is not None, (role, name)
    action = f"```{verb} [{element}]" + (f" [{text}] [0]```" if verb == "type" else "```")
    return env.step(action).observation


def test_the_environment_plays_a_deployment_without_starting_servers(forum, configs):
    path, top = configs
    before = dict(web_server._SHARED)
    env = make_env("web", webarena=str(path), webarena_urls={"reddit": forum.url},
                   judge="tests.web.test_webarena:judge_says_bob")
    assert env.num_tasks == 5 and web_server._SHARED == before
    # exact_match, solved and not
    env.reset(0)
    assert env.step(f"```stop [{top['title']}]```").reward == 1.0
    env.reset(0)
    assert env.step("```stop [no idea]```").reward == 0.0
    # url_match: click through to f/books
    obs = env.reset(2)
    obs = _act(env, obs, "link", "f/books")
    assert env.step("```stop []```").reward == 1.0
    # program_html on the last page: a comment the agent posted
    obs = env.reset(3)
    obs = _act(env, obs, "link", "f/books")
    obs = _act(env, obs, "link", top["title"])
    obs = _act(env, obs, "textbox", "Comment", "type", "Thanks from WebArena")
    obs = _act(env, obs, "button", "Post comment")
    assert env.step("```stop []```").reward == 1.0
    env.reset(3)
    assert env.step("```stop []```").reward == 0.0  # the start page lacks it
    # fuzzy_match through the judge hook
    env.reset(4)
    assert env.step("```stop [bob smith, I think]```").reward == 1.0
    # only the deployment's URLs
    env.reset(0)
    other = env.step("```goto [http://127.0.0.1:1/]```").observation[-1]["content"]
    assert "FEEDBACK: Refused" in other
    assert web_server._SHARED == before
