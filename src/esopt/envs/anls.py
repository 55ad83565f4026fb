"""ANLS, the DocVQA metric, and exact-match accuracy.

ANLS (Biten et al. 2019, used by DocVQA, Mathew et al. 2021): for one question,
max over its gold answers of s = 1 - NL(pred, gold) if NL < 0.5 else 0, where NL is the
Levenshtein distance over the longer length, on lowercased strings with surrounding
whitespace stripped and inner runs of whitespace collapsed. The `anls` package (pure
Python, no dependencies) implements exactly this, including the edge: NL == 0.5 scores
0, as the paper's `NL >= tau -> 0` says (lmms-eval's copy keeps 0.5 there); we call it
and only add the checks it lacks.
"""

from __future__ import annotations

from collections.abc import Sequence

THRESHOLD = 0.5


def _norm(s: str) -> str:
    return " ".join(str(s).strip().lower().split())


def anls(prediction: str, golds: Sequence[str], threshold: float = THRESHOLD) -> float:
    """ANLS of one prediction against its gold answers (max over them)."""
    from anls import anls_score

    if isinstance(golds, str):
        golds = [golds]
    if not golds:
        raise ValueError("anls: no gold answers")
    return float(anls_score(str(prediction), [str(g) for g in golds], threshold))


def exact_match(prediction: str, golds: Sequence[str]) -> bool:
    """Whether the prediction equals a gold answer (same normalisation as ANLS)."""
    if isinstance(golds, str):
        golds = [golds]
    return _norm(prediction) in {_norm(g) for g in golds}
