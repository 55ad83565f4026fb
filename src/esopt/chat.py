"""The chat types every layer shares: messages, sampling settings, completions.

Environments speak in conversations, backends turn them into completions under sampling
settings; both import these from here, below either of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Message = dict  # {"role": "system"|"user"|"assistant", "content": str}
Conversation = list[Message]


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings. temperature 0 is greedy; top_k 0 and top_p 1 disable those filters.

    The paper's evaluation decoder is temperature 0.7, top_p 0.8, top_k 20.
    """

    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    """Generation ends at the first of these strings; it is not part of the returned text."""
    seed: int = 0
    """Sampling seed: the same seed on the same batch gives the same samples (common
    random numbers across the directions of a generation)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        if any(not s for s in self.stop):
            raise ValueError("stop strings must be non-empty")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0



def render_chat(tokenizer, conversation: Conversation) -> str:
    """Chat-template text of a conversation, the same for every backend: a trailing
    assistant message (a prefill) is continued, not closed."""
    if not conversation:
        raise ValueError("empty conversation")
    prefill = conversation[-1]["role"] == "assistant"
    return tokenizer.apply_chat_template(conversation, tokenize=False,
                                         add_generation_prompt=not prefill,
                                         continue_final_message=prefill)

@dataclass(frozen=True)
class Completion:
    """One generated continuation."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    """`eos` (the model ended its turn), `stop` (a stop string ended it; the string is cut
    from `text`) or `length` (max_new_tokens reached)."""
    token_ids: tuple[int, ...] = ()
    """Every token the policy generated, in order: the EOS token last when finish_reason
    is `eos`, the stop string's tokens when `stop` (text is cut, ids are not), nothing
    appended when `length`. The RL baselines train on exactly these (never on re-encoded
    text)."""

    @property
    def stopped(self) -> bool:
        """Ended by EOS or a stop string (not by the length limit)."""
        return self.finish_reason != "length"


FINISH_REASONS = ("eos", "stop", "length")
