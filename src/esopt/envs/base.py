"""The environment protocol and the registry of environments by name.

An environment is a deterministic function of its seed: `reset(seed)` returns the first
observation, a list of chat messages that is the whole prompt the policy sees (the
environment decides how much history to show); `step(text)` takes the policy's raw
completion and returns the next observation, a reward, `done` and an info dict. A bad
action never raises: it costs the turn and is answered with feedback.

An environment whose reward has parts (a format bonus and correctness, say) names them in
the step info: `info[REWARD_COMPONENTS] = {"format": 0.1, "correct": 1.0}`, the parts of
that step's reward, summing to it; the ES ledger reports the reward split this way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from esopt.chat import Conversation

REWARD_COMPONENTS = "reward_components"
"""Step-info key: the step reward's named parts, summing to it."""


@dataclass
class StepResult:
    """What an environment returns for one action."""

    observation: Conversation
    reward: float
    done: bool
    info: dict = field(default_factory=dict)


class Environment(ABC):
    """A multi-turn text environment."""

    name: str = ""
    max_turns: int = 1
    max_new_tokens: int = 64
    """Tokens the policy may write per turn (a hint the rollout engine uses)."""
    stop: tuple[str, ...] = ()
    """Stop strings for the policy's turn."""
    outcome_columns: dict[str, str] = {}
    """Keys of the last turn's info that episode tables carry as columns, with their Arrow
    type names (null where an episode has none, e.g. it failed or never answered)."""

    @abstractmethod
    def reset(self, seed: int) -> Conversation:
        """Start the episode of task `seed`; return the first observation."""

    @abstractmethod
    def step(self, completion: str) -> StepResult:
        """Apply the policy's completion (its raw text) and return the result."""

    @property
    def success(self) -> bool:
        """Whether the episode so far counts as solved (read after `done`)."""
        return False


def example_turns(example: bool, turns: tuple[dict, ...]) -> tuple[dict, ...]:
    """An environment's worked example (chat turns put before each task) when `example` is
    true, else none; anything but true or false is a ValueError."""
    if not isinstance(example, bool):
        raise ValueError(f"example must be true or false, got {example!r}")
    return turns if example else ()


_REGISTRY: dict[str, Callable[..., Environment]] = {}


def register(name: str):
    """Class decorator: make an environment constructible by name."""

    def wrap(cls):
        if name in _REGISTRY:
            raise ValueError(f"environment {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def outcome_columns(name: str) -> dict[str, str]:
    """The registered environment's outcome columns ({} for an unknown name)."""
    import esopt.envs  # noqa: F401  (registers the built-in environments)

    cls = _REGISTRY.get(name)
    return dict(cls.outcome_columns) if cls is not None else {}


def make_env(name: str, **kwargs) -> Environment:
    """Construct a registered environment; unknown names and options fail clearly."""
    import esopt.envs  # noqa: F401  (registers the built-in environments)

    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"env: unknown environment {name!r}; known: {sorted(_REGISTRY)}") from None
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ValueError(f"env {name!r}: bad options {kwargs}: {e}") from None


def registered() -> list[str]:
    """Names of the registered environments."""
    import esopt.envs  # noqa: F401

    return sorted(_REGISTRY)
