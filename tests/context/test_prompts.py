"""EoH operator prompts and the parsing of LLM answers into code."""

import pytest

from esopt.ahd.problems import PROBLEMS
from esopt.context.prompts import (
    Parent,
    conversation,
    operator_prompt,
    parse_proposal,
    prefill_text,
)

TSP = PROBLEMS["tsp_constructive"]
PARENT = Parent("pick the nearest node", TSP.greedy_source, 7.0)


@pytest.mark.parametrize(
    "operator, parents, phrase",
    [
        ("i1", [], "describe your new algorithm and main steps in one sentence"),
        ("e1", [PARENT, PARENT], "totally different form from the given ones."),
        ("e2", [PARENT, PARENT], "identify the common backbone idea"),
        ("m1", [PARENT], "can be a modified version of the algorithm provided"),
        ("m2", [PARENT], "different parameter settings of the score function"),
    ],
)
def test_operator_prompts_carry_eoh_wording_and_the_signature_contract(operator, parents, phrase):
    text = operator_prompt(TSP, operator, parents)
    assert phrase in text and TSP.task in text
    assert "function named select_next_node" in text and "4 input(s)" in text
    for p in parents:
        assert p.code in text


def test_operator_errors_name_the_problem():
    with pytest.raises(ValueError, match="exactly one parent"):
        operator_prompt(TSP, "m1", [PARENT, PARENT])
    with pytest.raises(ValueError, match="unknown EoH operator"):
        operator_prompt(TSP, "x9")


def test_parse_fenced_code_and_braced_description():
    text = ("{Go to the closest node, ties to the lowest id.}\n```python\nimport numpy as np\n"
            "def select_next_node(current_node, destination_node, unvisited_nodes, "
            "distance_matrix):\n    return min(unvisited_nodes)\n```\nThanks")
    p = parse_proposal(TSP, text)
    assert p.description == "Go to the closest node, ties to the lowest id."
    assert p.code.startswith("import numpy as np\ndef select_next_node(")
    assert "Thanks" not in p.code


def test_parse_unfenced_code_and_missing_code():
    p = parse_proposal(TSP, "Sure.\ndef select_next_node(a, b, c, d):\n    return 1\n")
    assert p.code == "def select_next_node(a, b, c, d):\n    return 1\n"
    assert parse_proposal(TSP, "I cannot help with that.").code is None
    assert parse_proposal(TSP, "```python\ndef other(x):\n    return x\n```").code is None


def test_prefill_is_part_of_the_parsed_code():
    conv = conversation(TSP, "i1", prefill=True)
    assert conv[-1] == {"role": "assistant", "content": prefill_text(TSP)}
    p = parse_proposal(TSP, "return min(unvisited_nodes)\n```", prefill=True)
    assert p.code.endswith("    return min(unvisited_nodes)\n")
    assert "def select_next_node(current_node, destination_node, unvisited_nodes," in p.code
