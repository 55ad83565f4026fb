"""The policy protocol every backend implements: everything code outside `backends/` may use."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from esopt.chat import Completion, Conversation, SamplingParams
from esopt.es.strategy import Direction, Update


class Policy(Protocol):
    """A language-model policy that ES can perturb, restore and update in place.

    `esopt.backends.master.MasterWeightsPolicy` implements the ES half once (the float32
    master is the truth; served weights are recomputed from it); `hf` and `vllm` add how
    they serve and generate."""

    config: object
    """The model's transformers config (layers, hidden size: the FLOP count reads it)."""
    checkpoint_sha256: str | None
    """sha256 of the checkpoint it was loaded from, verified at load (None: Hub id, memory)."""
    population_capable: bool
    """Whether several full-rank directions can be scored in one population batch."""
    lowrank_population_capable: bool
    """Whether several low-rank directions can be scored in one population batch."""

    @property
    def parameter_names(self) -> list[str]:
        """The logical (Hugging Face) names of the tensors ES perturbs."""

    @property
    def num_parameters(self) -> int:
        """Elements ES perturbs."""

    @property
    def is_perturbed(self) -> bool:
        """Whether the served weights differ from the master right now."""

    def render(self, conversation: Conversation) -> str:
        """The chat-template text of a conversation (the same on every backend)."""

    def generate(self, conversations: list[Conversation],
                 sampling: SamplingParams) -> list[Completion]:
        """One completion per conversation, batched; row i samples from seed + i."""

    def perturbed(self, direction: Direction) -> AbstractContextManager:
        """Serve theta + sign*sigma*eps(direction) inside the block; exact theta after it."""

    def restore(self) -> None:
        """Serve the master weights exactly."""

    def apply(self, update: Update) -> None:
        """Add an update (rebuilt from its seeds) to the master and serve it."""

    def save(self, path, manifest: dict | None = None) -> dict:
        """Write the float32 master as a checkpoint with `manifest`; return the manifest."""
