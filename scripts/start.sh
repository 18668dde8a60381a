#!/bin/sh
# `npm start [-- --port P --data-dir D --config-file F]`: install and build what Sieve
# needs (the first time takes a minute), then run every component in this process.
set -eu
cd "$(dirname "$0")/.."
sh scripts/pnpm.sh install --frozen-lockfile --reporter=silent
sh scripts/pnpm.sh run --silent build
exec node apps/sieve/dist/main.js all "$@"
