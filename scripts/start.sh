#!/bin/sh
# `npm start`: install and build what Sieve needs, then run it.
set -eu
cd "$(dirname "$0")/.."
echo "sieve: the service does not exist yet (issue 6 builds \`sieve all\`); nothing to run." >&2
exit 1
