#!/bin/sh
# Prints help2man's include file for dlock(1): the help of each subcommand (`dlock CMD --help`,
# the same text users see), then the fixed sections of man/dlock.h2m.
#   dlock_commands.sh PATH/TO/dlock man/dlock.h2m OUT.h2m
set -eu
dlock=$1
fixed=$2
exec >"$3"
# roff: a backslash is written \e; a line starting with . or ' would be a request.
escape() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
echo "[COMMANDS]"
cmds='run acquire release status watch sandbox demo "semaphore resize"'
# `dlock serve` is in the tool only when it was built with the service (DLOCK_BUILD_SERVICE).
if "$dlock" serve --help >/dev/null 2>&1; then cmds="$cmds serve"; fi
eval "set -- $cmds"
for cmd in "$@"; do
  echo ".SS $cmd"
  echo ".nf"
  # shellcheck disable=SC2086 # "semaphore resize" is two words
  "$dlock" $cmd --help | escape
  echo ".fi"
done
cat "$fixed"
