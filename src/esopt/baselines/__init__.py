"""RL baselines on the same environments and HF backend: Agentic GRPO (and later PPO)."""
