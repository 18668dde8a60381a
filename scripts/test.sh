#!/bin/sh
# `npm test`: install, build, type-check, lint, check formatting, run the whole suite.
set -eu
cd "$(dirname "$0")/.."
sh scripts/pnpm.sh --version >/dev/null # installs the pinned pnpm on first use
PATH="$PWD/.tools/node_modules/.bin:$PATH"
export PATH
pnpm install --frozen-lockfile
pnpm run build
pnpm run typecheck
pnpm run lint
pnpm run format:check
pnpm run vitest
