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


# math-verify decides where it parses both sides: these are the cases the fallback gets
# wrong (sets in any order, sqrt and nested LaTeX fractions, an equation's value) or
# right only by accident; each fails without the package.
@pytest.mark.parametrize("pred, gold, correct", [
    ("\\{2, 1\\}", "\\{1,2\\}", True),                     # a set in another order
    ("\\{2, 1\\}", "1, 2", True),                          # a set against a bare list
    ("\\frac{\\sqrt{2}}{2}", "\\sqrt{2}/2", True),         # LaTeX vs plain sqrt fraction
    ("\\frac{1+\\sqrt5}{2}", "\\frac{1+\\sqrt{5}}{2}", True),  # brace-less \sqrt5
    ("\\dfrac34", "0.75", True),                           # brace-less \dfrac
    ("x=5", "5", True),                                    # the equation's right-hand side
    ("[0,1)", "[0,1]", False),                             # intervals: open is not closed
    ("(1,2)", "(2,1)", False),                             # ordered pairs
    ("3", "4", False),                                     # a wrong number: math-verify too
])
def test_math_verify_decides_where_it_applies(pred, gold, correct):
    assert check_answer(pred, gold) == (correct, "math_verify")


def test_without_math_verify_the_fallback_decides(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "math_verify", None)  # the import fails
    assert check_answer("\\{2, 1\\}", "\\{1,2\\}") == (False, "string")
    assert check_answer("\\frac{1}{2}", "0.5") == (True, "rational")
    # With the package: an answer it finds no expression in goes to the fallback too.
    monkeypatch.delitem(sys.modules, "math_verify")
    assert check_answer("\\{2, 1\\}", "\\{1,2\\}") == (True, "math_verify")
    assert check_answer("???", "???") == (True, "string")
    assert check_answer("\\frac{", "2") == (False, "string")
