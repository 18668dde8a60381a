#!/bin/sh
# Runs the project's pinned pnpm, installing it with npm on first use so that a fresh
# machine needs nothing but Node.js and npm. The copy lives in .tools/ (git-ignored).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(node -p "require('$root/package.json').packageManager.split('@')[1]")
bin="$root/.tools/node_modules/.bin/pnpm"
if [ ! -x "$bin" ] || [ "$("$bin" --version)" != "$version" ]; then
  npm install --silent --no-save --no-package-lock --prefix "$root/.tools" "pnpm@$version" >&2
fi
# Nested package scripts (`pnpm --filter … bench`) find the same pnpm on PATH.
PATH="$root/.tools/node_modules/.bin:$PATH"
export PATH
exec "$bin" "$@"
