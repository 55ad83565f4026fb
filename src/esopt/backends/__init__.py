"""Policy backends behind one protocol: `hf` (transformers) and, later, `vllm`."""

from esopt.backends.base import Completion, Conversation, Policy, SamplingParams

__all__ = ["Completion", "Conversation", "Policy", "SamplingParams"]
