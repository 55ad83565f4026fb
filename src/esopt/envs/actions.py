"""Tolerant parsing of Sudoku actions from free model text. Never raises."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# Only the head of a completion is read: bounds the work on pathological outputs.
MAX_CHARS = 2000

_JSON = re.compile(r"\{[^{}]{0,200}\}")
_VERB = re.compile(
    r"\bset\s*\(?\s*(?:r(?:ow)?\s*)?(\d{1,3})\s*[,\s]\s*(?:c(?:ol(?:umn)?)?\s*)?(\d{1,3})"
    r"\s*(?:[,\s]|=|:|\bto\b)\s*(?:v(?:al(?:ue)?)?\s*)?(?:=\s*)?(\d{1,3})", re.I)
_RC = re.compile(r"\br\s*(\d{1,3})\s*,?\s*c\s*(\d{1,3})\s*(?:=|:|\bto\b)\s*(\d{1,3})", re.I)
_BARE = re.compile(r"^\s*(\d{1,3})[\s,]+(\d{1,3})[\s,]+(\d{1,3})\b")

_JSON_KEYS = (("row", "col", "value"), ("r", "c", "v"), ("row", "column", "value"))


@dataclass(frozen=True)
class SudokuAction:
    """A move, 1-indexed as the model writes it."""

    row: int
    col: int
    value: int


def _from_json(text: str) -> SudokuAction | None:
    for m in _JSON.finditer(text):
        try:
            obj = json.loads(m.group(0))
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        lowered = {str(k).lower(): v for k, v in obj.items()}
        for keys in _JSON_KEYS:
            vals = [lowered.get(k) for k in keys]
            if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
                return SudokuAction(*vals)
            if all(isinstance(v, str) and v.strip().isdigit() and len(v.strip()) <= 3
                   for v in vals):
                return SudokuAction(*(int(v) for v in vals))
    return None


def parse_sudoku_action(text: str) -> SudokuAction | None:
    """The first action in `text`: JSON, `set 3 4 5` (and variants), `r3c4=5`, or `3 4 5`."""
    if not isinstance(text, str):
        return None
    text = text[:MAX_CHARS]
    action = _from_json(text)
    if action is not None:
        return action
    for pattern in (_VERB, _RC, _BARE):
        m = pattern.search(text)
        if m:
            return SudokuAction(*(int(g) for g in m.groups()))
    return None
