"""WebArena's action space, parsed from a policy's completion.

The action is the last ```fenced``` span (WebArena's prompts end with "the next action I
will perform is ```click [12]```"), or else the last line that starts with an action verb.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VERBS = ("click", "type", "goto", "scroll", "stop", "go_back", "hover")
_FENCED = re.compile(r"```(?:[a-z]*\n)?(.*?)```", re.S)
_PATTERNS = {
    "click": re.compile(r"^click\s*\[(\d+)\]$"),
    "hover": re.compile(r"^hover\s*\[(\d+)\]$"),
    # Non-greedy text with the line anchored: "type [3] [a]b] [0]" types "a]b", no Enter.
    "type": re.compile(r"^type\s*\[(\d+)\]\s*\[(.*?)\](?:\s*\[([01])\])?$", re.S),
    "goto": re.compile(r"^goto\s*\[(.+)\]$"),
    "scroll": re.compile(r"^scroll\s*\[(?:direction=)?(up|down)\]$", re.I),
    "stop": re.compile(r"^stop(?:\s*\[(.*)\])?$", re.S),
    "go_back": re.compile(r"^go_back$"),
}


@dataclass(frozen=True)
class Action:
    """One parsed action: its verb and arguments."""

    verb: str
    element: int | None = None
    text: str = ""
    enter: bool = True


def _candidate(completion: str) -> str | None:
    fenced = [s.strip() for s in _FENCED.findall(completion) if s.strip()]
    if fenced:
        return fenced[-1]
    lines = [ln.strip().strip("`").strip() for ln in completion.splitlines()]
    found = [ln for ln in lines if ln.split(" ", 1)[0].split("[", 1)[0] in VERBS]
    return found[-1] if found else None


def parse_action(completion: str) -> Action | str:
    """The completion's action, or a feedback message saying what is wrong with it."""
    text = _candidate(completion or "")
    if text is None:
        return ("No action found. End your answer with one action in backticks, e.g. "
                "```click [12]```, ```type [7] [text]```, ```goto [url]```, "
                "```scroll [down]```, ```go_back``` or ```stop [answer]```.")
    verb = text.split(" ", 1)[0].split("[", 1)[0]
    m = _PATTERNS[verb].match(text) if verb in _PATTERNS else None
    if m is None:
        return f"Cannot parse the action {text[:200]!r}."
    if verb in ("click", "hover"):
        return Action(verb, element=int(m.group(1)))
    if verb == "type":
        return Action(verb, element=int(m.group(1)), text=m.group(2), enter=m.group(3) != "0")
    if verb == "goto":
        return Action(verb, text=m.group(1).strip())
    if verb == "scroll":
        return Action(verb, text=m.group(1).lower())
    if verb == "stop":
        return Action(verb, text=(m.group(1) or "").strip())
    return Action(verb)
