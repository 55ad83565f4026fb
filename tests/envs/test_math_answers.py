"""Answer extraction and checking on the tricky cases."""

import pytest

from esopt.envs.math_answers import check_answer, extract_answer, last_boxed


@pytest.mark.parametrize("text, expected", [
    ("Answer: 42", "42"),
    ("work...\nAnswer: 12\nwait, recheck\nAnswer: 13", "13"),          # the last line wins
    ("**Answer:** $\\frac{3}{4}$", "\\frac{3}{4}"),
    ("Answer: $\\boxed{7}$", "7"),                                      # box inside the line
    ("so $\\boxed{\\frac{1}{\\sqrt{2}}}$ and then $\\boxed{2}$.", "2"),   # last box
    ("nested \\boxed{\\frac{\\sqrt{\\{3\\}}}{2}}", "\\frac{\\sqrt{\\{3\\}}}{2}"),
    ("unbalanced \\boxed{3", None),
    ("I do not know.", None),
    ("", None),
])
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_last_boxed_skips_an_unclosed_last_box():
    assert last_boxed("\\boxed{1} then \\boxed{2") == "1"


@pytest.mark.parametrize("pred, gold, correct, decided_by", [
    ("\\frac{1}{2}", "0.5", True, "rational"),
    ("\\dfrac{6}{8}", "3/4", True, "rational"),
    ("-\\frac{2}{3}", "\\frac{-2}{3}", True, "rational"),
    ("1,000", "1000", True, "string"),
    ("5 cm", "5", True, "string"),
    ("90^\\circ", "90", True, "string"),
    ("15 square units", "15", True, "string"),
    ("\\text{(B)}", "(B)", True, "string"),
    ("2\\sqrt{2}", "\\sqrt{8}", True, "sympy"),
    ("(x+1)^2", "x^2+2x+1", True, "sympy"),
    ("3", "4", False, "rational"),
    ("0.3333", "\\frac{1}{3}", False, "rational"),  # exact rationals: no rounding
    (None, "3", False, "none"),
])
def test_check_answer_without_math_verify(pred, gold, correct, decided_by):
    assert check_answer(pred, gold, use_math_verify=False) == (correct, decided_by)
