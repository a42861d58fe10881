#!/usr/bin/env bash
# The README's first command: installs what dlock needs, builds it, and runs `dlock demo`:
# a local 5-node sandbox, worker processes sharing a counter under the lock with fencing, nodes
# killed and restarted, a holder paused past its ttl, and a summary. It cleans up after itself.
# Arguments go to `dlock demo` (e.g. --workers 4 --duration 10s).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/release/tools/dlock/dlock demo "$@"
