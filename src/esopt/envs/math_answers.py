"""Answer extraction and equivalence checking for math problems.

Extraction: the last `Answer:` line wins; without one, the last balanced `\\boxed{...}`.
Checking: `math-verify` (Hugging Face's checker, the reference of DAPO-style evaluations;
the `math` extra installs it) decides wherever it applies, i.e. it parsed both the answer
and the reference, and then its verdict is final either way. Where it does not apply (not
installed, disabled, a side it finds no expression in, an error or its timeout) the fallback
decides: exact strings after normalisation, then exact rational values (fractions,
decimals, integers with separators), then sympy equivalence of simple expressions.
`check_answer` says which of these decided; evaluation files carry it as `decided_by`.
"""

from __future__ import annotations

import re
from fractions import Fraction

_ANSWER_LINE = re.compile(r"^\s*\**\s*answer\s*\**\s*[:：]\s*\**\s*(.+?)\s*$",
                          re.IGNORECASE | re.MULTILINE)


def last_boxed(text: str) -> str | None:
    """Content of the last balanced \\boxed{...} (or \\fbox{...}), nested braces allowed."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[start: i - 1].strip()
    return None


def extract_answer(text: str) -> str | None:
    """The last `Answer:` line (a boxed value inside it is unwrapped), else the last box."""
    lines = _ANSWER_LINE.findall(text)
    if lines:
        answer = lines[-1].strip()
        boxed = last_boxed(answer)
        answer = boxed if boxed is not None else answer
        return answer.strip().strip("$").strip() or None
    return last_boxed(text)


_LATEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_UNITS = re.compile(
    r"\s*(?:units?|degrees?|cm|meters?|m|km|inches|inch|feet|ft|miles?|hours?|minutes?|"
    r"seconds?|dollars?|cents?|square|sq|\^\\circ|\^\{\\circ\}|°|%)\.?\s*$", re.IGNORECASE)


def normalise(answer: str) -> str:
    """A canonical string: no $, spaces, \\left/\\right, text wrappers, units or trailing dot."""
    s = answer.strip().strip("$").strip()
    s = _LATEX_TEXT.sub(r"\1", s)
    s = s.replace("\\!", "").replace("\\,", "").replace("\\;", "").replace("\\ ", "")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac")
    s = s.replace("\\tfrac", "\\frac")
    prev = None
    while prev != s:  # units may stack: "5 square units"
        prev, s = s, _UNITS.sub("", s).strip()
    s = s.rstrip(".").replace(" ", "")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")  # thousands separators
    return s


def _rational(s: str) -> Fraction | None:
    m = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}", s) or re.fullmatch(
        r"(-?)\\frac(\d)(\d)", s)
    try:
        if m:
            value = Fraction(int(m.group(2)), int(m.group(3)))
            return -value if m.group(1) else value
        if re.fullmatch(r"-?\d+/\d+|-?\d+(\.\d+)?|-?\.\d+", s):
            return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _sympy_equal(a: str, b: str) -> bool | None:
    try:
        import sympy
        from sympy.parsing.sympy_parser import (
            implicit_multiplication_application,
            parse_expr,
            standard_transformations,
        )

        transformations = standard_transformations + (implicit_multiplication_application,)

        def parse(s):
            s = re.sub(r"\\frac\{([^{}]+)\}\{([^{}]+)\}", r"((\1)/(\2))", s)
            s = re.sub(r"\\sqrt\{([^{}]+)\}", r"sqrt(\1)", s).replace("\\pi", "pi")
            s = s.replace("^", "**").replace("\\cdot", "*").replace("\\times", "*")
            if "\\" in s or "{" in s:
                raise ValueError("latex left")
            return parse_expr(s, transformations=transformations, evaluate=True)

        return bool(sympy.simplify(parse(a) - parse(b)) == 0)
    except Exception:  # noqa: BLE001 - anything unparsable is "undecided"
        return None


def _math_verify(pred: str, gold: str) -> bool | None:
    """math-verify's verdict, or None where it does not apply (no expression on a side)."""
    try:
        from math_verify import parse, verify
    except ImportError:
        return None
    try:
        # The answers come without $ (extract_answer strips them): wrapping them makes the
        # LaTeX extractor read them as math; a bare number parses either way.
        gold_parsed, pred_parsed = parse(f"${gold}$"), parse(f"${pred}$")
        # parse() returns [expression, source string], or just the string when it found no
        # expression: then verify() would only compare raw strings, less than the fallback.
        if not any(not isinstance(v, str) for v in gold_parsed) or not any(
                not isinstance(v, str) for v in pred_parsed):
            return None
        return bool(verify(gold_parsed, pred_parsed))
    except Exception:  # noqa: BLE001 - its timeout (SIGALRM: main thread only), parse errors
        return None


def check_answer(pred: str | None, gold: str, use_math_verify: bool = True
                 ) -> tuple[bool, str]:
    """(correct, decided_by): decided_by is none|math_verify|string|rational|sympy."""
    if pred is None or not pred.strip():
        return False, "none"
    if use_math_verify:
        verdict = _math_verify(pred, gold)
        if verdict is not None:
            return verdict, "math_verify"
    a, b = normalise(pred), normalise(gold)
    if a == b:
        return True, "string"
    ra, rb = _rational(a), _rational(b)
    if ra is not None and rb is not None:
        return ra == rb, "rational"
    verdict = _sympy_equal(a, b)
    if verdict is not None:
        return verdict, "sympy"
    return False, "string"
