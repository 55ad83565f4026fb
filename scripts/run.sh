#!/usr/bin/env bash
# The run command: install what is needed, then build the `all` target at the default
# (tiny) scale on this machine. Extra arguments go to snakemake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export PATH="$PWD/.venv/bin:$PATH"  # rules call the `esopt` CLI
exec snakemake --cores all "$@"
