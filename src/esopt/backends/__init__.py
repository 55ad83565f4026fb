"""Policy backends behind one protocol (`esopt.backends.base.Policy`): `hf` (transformers)
and `vllm`; `esopt.backends.factory.load_policy` builds either from a checkpoint."""

from esopt.backends.base import Policy

__all__ = ["Policy"]
