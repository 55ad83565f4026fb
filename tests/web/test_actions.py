"""WebArena's action strings, parsed from completions; bad ones come back as feedback."""

import pytest

from esopt.web.actions import Action, parse_action


@pytest.mark.parametrize("completion, action", [
    ("I will click. ```click [12]```", Action("click", element=12)),
    ("```type [3] [hello world]```", Action("type", element=3, text="hello world")),
    ("```type [3] [a]b] [0]```", Action("type", element=3, text="a]b", enter=False)),
    ("```type [3] [x] [1]```", Action("type", element=3, text="x", enter=True)),
    ("```goto [http://127.0.0.1:5000/f/python]```",
     Action("goto", text="http://127.0.0.1:5000/f/python")),
    ("```scroll [down]```", Action("scroll", text="down")),
    ("```scroll [direction=up]```", Action("scroll", text="up")),
    ("```stop [The answer is 42]```", Action("stop", text="The answer is 42")),
    ("```stop```", Action("stop", text="")),
    ("```go_back```", Action("go_back")),
    ("first ```click [1]``` then ```click [2]```", Action("click", element=2)),
    ("Thinking...\nclick [7]\n", Action("click", element=7)),
])
def test_parses_webarena_actions(completion, action):
    assert parse_action(completion) == action


@pytest.mark.parametrize("completion", ["", "I am not sure.", "```click [abc]```",
                                        "```press [Enter]```", "```type [3]```",
                                        "```scroll [left]```", None])
def test_bad_actions_are_feedback_not_errors(completion):
    feedback = parse_action(completion)
    assert isinstance(feedback, str) and feedback
