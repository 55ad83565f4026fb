"""The ES update of float32 tensors, whatever the method (plain, CoPES, low-rank), and what
the served precision keeps of it.

The update is computed in float32 (the intended update) and added to the float32 master;
the served weights are the master rounded to the serving dtype. In bfloat16 a weight of
magnitude ~0.05 has a spacing of ~2.4e-4, so an ES step of ~1e-4 mostly leaves the served
weight where it was: `UpdateStats` measures what changed where it is served (the realised
update), its cosine with the intended one, and the fraction of weights left unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass

import torch

from esopt.es.lowrank import lowrank_sum_chunks
from esopt.es.noise import noise_sum_chunks
from esopt.es.strategy import Update


@dataclass(frozen=True)
class UpdateStats:
    """What one update did: the float32 update's norm (intended), the norm of the change of
    the served weights (realised), their cosine, and the fraction of weights whose served
    value did not change."""

    parameters: int
    intended_norm: float
    realised_norm: float
    realised_cosine: float | None
    """None when either update is zero (no direction to compare)."""
    unchanged_fraction: float

    @classmethod
    def zero(cls, parameters: int) -> UpdateStats:
        """A zero update: nothing moved."""
        return cls(parameters, 0.0, 0.0, None, 1.0)

    def to_dict(self) -> dict:
        return asdict(self)


def update_chunks(tensors: Mapping[str, torch.Tensor], update: Update
                  ) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, a view of tensors[name], the update's float32 delta over it) chunk by chunk,
    the noise rebuilt from the update's seeds; add each delta before taking the next."""
    if update.rank is not None:
        return lowrank_sum_chunks(tensors, update.seeds, update.coeffs, update.scale,
                                  update.rank, update.full_rank_vectors)
    return noise_sum_chunks(tensors, update.seeds, update.coeffs, update.scale,
                            subspaces=update.subspaces or None)


def add_update_(tensors: Mapping[str, torch.Tensor], update: Update,
                served: Mapping[str, torch.dtype] | None = None) -> UpdateStats:
    """tensors += the update (in place, float32), and what it changed where the weights are
    served in `served[name]` (default: float32, the master itself)."""
    parameters = sum(t.numel() for t in tensors.values())
    if update.is_zero:
        return UpdateStats.zero(parameters)
    served = served or {}
    dot = intended = realised = 0.0
    changed = 0
    for name, target, delta in update_chunks(tensors, update):
        dtype = served.get(name, torch.float32)
        before = target.to(dtype, copy=True)
        target.add_(delta)
        moved = target.to(dtype).double() - before.double()
        intended_64 = delta.double()
        dot += float((moved * intended_64).sum())
        intended += float(intended_64.square().sum())
        realised += float(moved.square().sum())
        changed += int(torch.count_nonzero(moved))
    norms = math.sqrt(intended) * math.sqrt(realised)
    return UpdateStats(parameters, math.sqrt(intended), math.sqrt(realised),
                       dot / norms if norms > 0 else None, 1 - changed / parameters)
