#!/usr/bin/env bash
# The test command: install what is needed, then run every test tier (unit, tiny-model
# integration, real SmolLM2-135M tests marked slow, workflow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest "$@"
