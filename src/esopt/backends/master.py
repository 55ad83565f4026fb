"""What every ES-ready backend shares: a float32 master copy of the weights is the truth.

The served weights (any dtype, any device, in any process) are always recomputed from the
master: perturbing writes master + sign*sigma*eps(direction); restoring writes the master
back (never subtracting: that drifts by a whole update after ~30 cycles in bf16); an
update is added to the master, then served. This class holds that protocol once (which
state allows which call, when cached KV must be dropped, what a checkpoint holds); a
backend supplies the five primitives that touch its weights.
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from esopt.es.apply import UpdateStats
from esopt.es.strategy import Direction, Update
from esopt.runtime.checkpoint import write_checkpoint

log = logging.getLogger(__name__)


class MasterWeightsPolicy(ABC):
    """A policy whose served weights are recomputed from a float32 master copy."""

    checkpoint_sha256: str | None = None
    """sha256 of the checkpoint the policy was loaded from, verified when loaded
    (esopt.backends.factory.load_policy); None for a Hub id or a policy built in memory."""
    population_capable: bool = False
    """Whether several full-rank directions can be scored in one population batch."""
    lowrank_population_capable: bool = False
    """Whether several low-rank directions can be scored in one population batch."""
    num_parameters: int
    """Elements of the logical (master) weights."""

    _active: Direction | str | None = None

    # ------------------------------------------------------------- backend primitives
    @abstractmethod
    def _serve_perturbed(self, direction: Direction) -> None:
        """Serve master + sign * sigma * eps(direction)."""

    @abstractmethod
    def _serve_master(self) -> None:
        """Serve the master weights exactly."""

    @abstractmethod
    def _add_to_master(self, update: Update) -> UpdateStats | None:
        """master += the update (its noise rebuilt from seeds), in float32; what it changed
        in the served weights when the backend can tell (esopt.es.apply.UpdateStats)."""

    @abstractmethod
    def master_weights(self) -> dict[str, torch.Tensor]:
        """The float32 master in logical (Hugging Face) layout: what a checkpoint holds."""

    @abstractmethod
    def _model_files(self) -> dict:
        """write_checkpoint's `config`, `tokenizer` and `generation_config`."""

    def _serve_combined(self, terms: list[tuple[int, float]]) -> None:
        raise NotImplementedError(f"{type(self).__name__} serves no combination of directions")

    def _weights_changed(self) -> None:
        """Drop whatever was computed with the previous weights (cached KV)."""
        return None

    def _check_supported(self, what: Direction | Update) -> None:
        """Refuse a direction or update this backend cannot serve."""
        return None

    # ------------------------------------------------------------------ the protocol
    @property
    def is_perturbed(self) -> bool:
        """Whether the served weights differ from the master (inside perturbed/combined)."""
        return self._active is not None

    def _check_unperturbed(self, action: str) -> None:
        if self._active is not None:
            what = (f"along direction {self._active.index}"
                    if isinstance(self._active, Direction) else f"({self._active})")
            raise RuntimeError(f"{action}: already perturbed {what}; leave the block first")

    @contextmanager
    def perturbed(self, direction: Direction) -> Iterator[MasterWeightsPolicy]:
        """Serve theta + sign*sigma*eps(direction) inside the block; exact theta after it."""
        self._check_unperturbed("perturbed()")
        self._check_supported(direction)
        self._active = direction
        try:
            self._serve_perturbed(direction)
            self._weights_changed()
            yield self
        finally:
            self.restore()
            self._active = None

    @contextmanager
    def combined(self, terms: Sequence[tuple[int, float]]) -> Iterator[MasterWeightsPolicy]:
        """Serve theta + sum_k step_k * eps(seed_k) (full-rank noise of each (seed, step)
        term) inside the block; exact theta after it. A point of a plane through theta (the
        reward landscape); one term (seed, sign*sigma) serves what perturbed() serves."""
        self._check_unperturbed("combined()")
        terms = [(int(seed), float(step)) for seed, step in terms if step != 0]
        self._active = f"combination of seeds {[seed for seed, _ in terms]}"
        try:
            self._serve_combined(terms)
            self._weights_changed()
            yield self
        finally:
            self.restore()
            self._active = None

    def restore(self) -> None:
        """Serve the master weights (bit-exact)."""
        self._serve_master()
        self._weights_changed()

    def apply(self, update: Update) -> UpdateStats | None:
        """theta += alpha/G * sum_i w_i sign_i eps_i, accumulated in float32 in the master;
        returns what the update changed in the served weights (None where the backend
        cannot tell)."""
        self._check_unperturbed("apply()")
        if update.is_zero:
            log.info("generation %d: zero update, weights unchanged", update.generation)
            return UpdateStats.zero(self.num_parameters)
        self._check_supported(update)
        stats = self._add_to_master(update)
        self.restore()
        return stats

    def save(self, path: str | os.PathLike, manifest: dict | None = None) -> dict:
        """Write the float32 master, the model's files and the manifest; return the manifest."""
        self._check_unperturbed("save()")
        return write_checkpoint(path, self.master_weights(), manifest=manifest,
                                **self._model_files())
