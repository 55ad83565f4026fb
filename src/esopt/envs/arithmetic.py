"""Safe evaluation of arithmetic expressions (+ - * / and parentheses on integers).

Walks Python's AST and allows nothing but integer literals and the four operators, in
exact rational arithmetic: no `eval`, no names, no calls, no powers (which could build
huge numbers), bounded length and depth.
"""

from __future__ import annotations

import ast
from fractions import Fraction

MAX_EXPR_CHARS = 200
MAX_LITERAL = 10**6

_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


class ExpressionError(ValueError):
    """The text is not an allowed arithmetic expression."""


def _walk(node, literals: list[int]) -> Fraction:
    if isinstance(node, ast.Expression):
        return _walk(node.body, literals)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        if not 0 <= node.value <= MAX_LITERAL:
            raise ExpressionError(f"literal out of range: {node.value}")
        literals.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _walk(node.left, literals), _walk(node.right, literals)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ExpressionError("division by zero")
        return _OPS[type(node.op)](left, right)
    raise ExpressionError(f"not allowed: {type(node).__name__}")


def evaluate(expr: str) -> tuple[Fraction, list[int]]:
    """(exact value, integer literals in order) of an allowed expression."""
    if not isinstance(expr, str) or not expr.strip():
        raise ExpressionError("empty expression")
    if len(expr) > MAX_EXPR_CHARS:
        raise ExpressionError("expression too long")
    if any(ch not in "0123456789+-*/() \t" for ch in expr):
        raise ExpressionError("only digits, + - * / and parentheses are allowed")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise ExpressionError(f"syntax: {e}") from None
    literals: list[int] = []
    try:
        return _walk(tree, literals), literals
    except RecursionError:
        raise ExpressionError("expression too deep") from None
