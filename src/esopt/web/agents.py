"""Scripted agents that play through the real environment by writing action strings.

The oracle follows its task's solution: it finds each step's element by role and name in
the observation text it is shown (scrolling down when the element is not in view) and
writes the action a policy would. The random agent writes random, well-formed actions
with ids taken from the page it sees.
"""

from __future__ import annotations

import random
import re

from esopt.web.task import Step, Task

_LINE = re.compile(r"^\s*\[(\d+)\] (\S+) (.*)$")
_URL = re.compile(r"^URL: (https?://[^/\s]+)", re.M)
MAX_SCROLLS = 10


def find_element(observation: str, role: str, name: str) -> int | None:
    """The id of the first visible element with this role and exact name."""
    want = f"{role} {name!r}"
    for line in observation.splitlines():
        m = _LINE.match(line)
        if m and f"{m.group(2)} {m.group(3)}".startswith(want):
            rest = f"{m.group(2)} {m.group(3)}"[len(want):]
            if not rest or rest.startswith(" "):
                return int(m.group(1))
    return None


class OracleAgent:
    """Plays a task's scripted solution, one action per observation."""

    def __init__(self, task: Task):
        self.steps = list(task.solution)
        self.index, self.scrolls = 0, 0

    def act(self, observation: str) -> str:
        """The next action (in backticks) for this observation."""
        if self.index >= len(self.steps):
            return "```stop []```"
        step: Step = self.steps[self.index]
        if step.verb == "goto":
            self.index += 1
            m = _URL.search(observation)  # the site's origin, from the page shown
            return f"```goto [{m.group(1) if m else ''}{step.text}]```"
        if step.verb == "stop":
            self.index += 1
            return f"```stop [{step.text}]```"
        element = find_element(observation, step.role, step.name)
        if element is None:
            self.scrolls += 1
            return "```scroll [down]```" if self.scrolls <= MAX_SCROLLS else "```stop []```"
        self.index, self.scrolls = self.index + 1, 0
        if step.verb == "click":
            return f"Let me click it.\n```click [{element}]```"
        return f"```type [{element}] [{step.text}] [0]```"


class RandomAgent:
    """Random well-formed actions on the ids of the current page (seeded)."""

    WORDS = ("hello", "test", "python", "42", "issue", "cart", "yes", "new post")

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def act(self, observation: str) -> str:
        """A random action over the observation's element ids."""
        ids = [int(m.group(1)) for m in map(_LINE.match, observation.splitlines()) if m]
        r, word = self.rng.random(), self.rng.choice(self.WORDS)
        if r < 0.05:
            return f"```stop [{word}]```"
        if r < 0.1:
            return f"```scroll [{self.rng.choice(['up', 'down'])}]```"
        if r < 0.15:
            return "```goto [/]```"
        if r < 0.2:
            return "```go_back```"
        if not ids:
            return "```scroll [down]```"
        if r < 0.35:
            return f"```type [{self.rng.choice(ids)}] [{word}]```"
        return f"```click [{self.rng.choice(ids)}]```"


def play(env, seed: int, agent_for) -> tuple[bool, list[str]]:
    """Play one episode of `env` (a WebEnv) with the agent `agent_for(task)`; return
    (success, the actions written)."""
    obs = env.reset(seed)
    agent = agent_for(env.task)
    actions = []
    for _ in range(env.max_turns):
        action = agent.act(obs[-1]["content"])
        actions.append(action)
        result = env.step(action)
        if result.done:
            break
        obs = result.observation
    return env.success, actions
