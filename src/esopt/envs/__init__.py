"""Environments: one module per environment, registered by name (see `make_env`)."""

from esopt.envs import countdown, docvqa, math_tool, sudoku, web  # noqa: F401  (registration)
from esopt.envs.base import Environment, StepResult, make_env, registered

__all__ = ["Environment", "StepResult", "make_env", "registered"]
