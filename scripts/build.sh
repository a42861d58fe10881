#!/usr/bin/env bash
# Installs the dependencies and builds dlock (release preset) into build/release.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
cmake --preset release >/dev/null
cmake --build build/release -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
echo "built: build/release/tools/dlock/dlock"
