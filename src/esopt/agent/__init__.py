"""The agent side: batched multi-turn rollouts, trajectories and evaluation."""
