"""Runtime pieces: checkpoints on disk (and later fan-out and sandboxing)."""
