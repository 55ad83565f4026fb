"""The ES core: seeds, noise, shaping, schedules and the ask/tell strategy (pure math)."""

from esopt.es.noise import NOISE_BLOCK, noise_chunks, tensor_noise
from esopt.es.schedules import SigmaSchedule
from esopt.es.seeds import direction_seed, mix, tensor_seed
from esopt.es.shaping import centered_ranks, get_shaping, zscore
from esopt.es.strategy import ES, Direction, ESConfig, ESState, Update

__all__ = [
    "ES", "NOISE_BLOCK", "Direction", "ESConfig", "ESState", "SigmaSchedule", "Update",
    "centered_ranks", "direction_seed", "get_shaping", "mix", "noise_chunks",
    "tensor_noise", "tensor_seed", "zscore",
]
