#!/usr/bin/env bash
# The Debian packages the benchmark needs beyond scripts/install-deps.sh (bench/run.sh calls
# it; scripts/test.sh too, before it runs the smoke run beside the install checks, whose dpkg
# must not meet this apt-get).
set -euo pipefail

# The peers and the plot: Debian's redis-py, gnuplot and valgrind (callgrind); Node.js and npm
# from Debian unless some node is installed already.
missing=()
for p in python3-redis gnuplot-nox valgrind; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
