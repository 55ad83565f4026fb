"""Prompt-space search composed with ES: EoH and Sample outer loops (and, later, skills)."""
