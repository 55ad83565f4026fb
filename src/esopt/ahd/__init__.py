"""Automatic heuristic design: problems whose candidate solutions are LLM-written functions.

Each problem module (`tsp`, `kp`, `asp`) holds its instance generator, the trusted
harness that runs a candidate function inside the sandbox, the parent-side validation and
objective, and its reference rows (exact optimum, greedy construction).
"""
