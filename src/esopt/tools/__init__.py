"""Agent tools that run inside the sandbox child: light modules (no torch, no esopt.envs)."""
