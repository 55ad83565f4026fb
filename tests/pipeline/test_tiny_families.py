"""Issue 37: the tiny math, DocVQA and web scales train and evaluate on an easier family
of the paper's tasks (one SmolLM2-135M solves some of), the held-out tasks apart from the
training ones: the scale files as the workflow merges and parses them."""

from pathlib import Path

import pytest
import yaml

from esopt.envs import make_env
from esopt.pipeline.config import merge_config, run_specs
from esopt.pipeline.stages import eval_tasks

REPO = Path(__file__).resolve().parents[2]


def base_spec(scale: str):
    """The base model's run spec of a scale (config/config.yaml, then the scale file)."""
    cfg = merge_config(yaml.safe_load((REPO / "config/config.yaml").read_text()),
                       yaml.safe_load((REPO / f"config/scales/{scale}.yaml").read_text()))
    return next(s for s in run_specs(cfg) if s.method == "base")


def held_out_and_training(spec):
    """(held-out environment, its evaluated task seeds, training environment)."""
    held_out = make_env(spec.env, **spec.eval_env_kwargs)
    return (held_out, eval_tasks(spec.env, spec.eval_env_kwargs, spec.eval_tasks),
            make_env(spec.env, **spec.env_kwargs))


def test_math_evaluates_held_out_generated_problems_with_the_example():
    spec = base_spec("math")
    held_out, seeds, train = held_out_and_training(spec)
    assert spec.env_kwargs["example"] is True and spec.eval_env_kwargs["example"] is True
    assert spec.env_kwargs["require_tool"] is True and spec.horizon == 2
    questions = [held_out.problems[s].question for s in seeds]
    assert len(seeds) == spec.eval_tasks == 8 and len(set(questions)) == 8
    assert {held_out.problems[s].source for s in seeds} == {"generated:1"}
    assert not set(questions) & {p.question for p in train.problems}
    assert held_out.reset(seeds[0])[1:5] == train.reset(0)[1:5]  # the same example


def test_docvqa_evaluates_held_out_short_pages_with_the_example():
    spec = base_spec("docvqa")
    held_out, seeds, train = held_out_and_training(spec)
    for kwargs in (spec.env_kwargs, spec.eval_env_kwargs):
        assert kwargs["layout"] == "short" and kwargs["example"] is True
    assert all(held_out.tasks[s].kind == "field" for s in seeds)
    assert all(t.kind == "field" for t in train.tasks)
    assert not {held_out.tasks[s].image for s in seeds} & {t.image for t in train.tasks}


def test_web_evaluates_every_short_test_task_with_the_example():
    pytest.importorskip("flask")
    spec = base_spec("web")
    held_out, seeds, train = held_out_and_training(spec)
    for kwargs in (spec.env_kwargs, spec.eval_env_kwargs):
        assert kwargs["family"] == "short" and kwargs["example"] is True
    assert spec.env_kwargs["split"] == "train" and spec.eval_env_kwargs["split"] == "test"
    assert spec.horizon == 2 and seeds == list(range(held_out.num_tasks))
    assert all(len(t.solution) == 2 for t in held_out.tasks + train.tasks)
    assert not {t.id for t in held_out.tasks} & {t.id for t in train.tasks}


@pytest.mark.parametrize("scale, section, option, bad, says", [
    ("math", "env_options", "example", "yes", "example must be true or false"),
    ("docvqa", "env_options", "layout", "tiny", "layout must be one of"),
    ("docvqa", "eval", "layout", "tiny", "layout must be one of"),
    ("web", "env_options", "family", "easy", "family must be one of"),
    ("web", "env_options", "example", 1, "example must be true or false"),
])
def test_a_bad_value_of_a_new_option_fails_before_any_job_naming_the_key(scale, section,
                                                                         option, bad, says):
    from esopt.pipeline.config import ConfigError

    if scale == "web":
        pytest.importorskip("flask")
    cfg = merge_config(yaml.safe_load((REPO / "config/config.yaml").read_text()),
                       yaml.safe_load((REPO / f"config/scales/{scale}.yaml").read_text()))
    options = (cfg[scale]["eval"].setdefault("env_options", {}) if section == "eval"
               else cfg[scale]["env_options"])
    options[option] = bad
    key = f"{scale}.eval.env_options" if section == "eval" else f"{scale}.env"
    with pytest.raises(ConfigError, match=rf"^{key}: .*{says}"):
        run_specs(cfg)
