"""The ES update of float32 tensors, whatever the method (plain, CoPES, low-rank)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from esopt.es.lowrank import add_lowrank_sum_
from esopt.es.noise import add_noise_sum_
from esopt.es.strategy import Update


def add_update_(tensors: Mapping[str, torch.Tensor], update: Update) -> None:
    """tensors += the update (in place): its noise rebuilt from its seeds."""
    if update.is_zero:
        return
    if update.rank is not None:
        add_lowrank_sum_(tensors, update.seeds, update.coeffs, update.scale, update.rank,
                         update.full_rank_vectors)
    else:
        add_noise_sum_(tensors, update.seeds, update.coeffs, update.scale,
                       subspaces=update.subspaces or None)
