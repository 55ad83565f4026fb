"""The ES core: seeds, noise, shaping, schedules and the ask/tell strategy (pure math)."""

from esopt.es.noise import NOISE_BLOCK, NOISE_SPEC, draw, noise_chunks, region_noise, tensor_noise
from esopt.es.schedules import SigmaSchedule
from esopt.es.seeds import direction_seed, mix
from esopt.es.shaping import centered_ranks, get_shaping, zscore
from esopt.es.strategy import ES, Direction, ESConfig, ESState, Update

__all__ = [
    "ES", "NOISE_BLOCK", "NOISE_SPEC", "Direction", "ESConfig", "ESState", "SigmaSchedule",
    "Update", "centered_ranks", "direction_seed", "draw", "get_shaping", "mix",
    "noise_chunks", "region_noise", "tensor_noise", "zscore",
]
