#!/bin/sh
# VictoriaLogs for `pnpm bench:peers`: `sh scripts/victorialogs.sh build|path`.
#
# Built from its Go module with the machine's Go toolchain (no Docker, no downloaded
# binaries) and cached under .cache/victorialogs (git-ignored); the build takes about a
# minute on two cores. `path` prints the binary's path, building it first if needed. The
# bench starts and stops VictoriaLogs itself, with flags of its own.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

# A release the Go module proxy served and the local Go (1.26) builds without replaces;
# change it here and the next use rebuilds.
VICTORIALOGS_VERSION=v1.52.1

cache="$root/.cache/victorialogs"
bin="$cache/bin/victoria-logs"
stamp="$cache/bin/version"

build() {
  if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VICTORIALOGS_VERSION" ]; then
    return 0
  fi
  command -v go >/dev/null || {
    echo "victorialogs.sh: the Go toolchain is needed to build VictoriaLogs (go install)" >&2
    exit 1
  }
  echo "victorialogs.sh: building VictoriaLogs $VICTORIALOGS_VERSION (first run only)" >&2
  mkdir -p "$cache/bin"
  tmp="$cache/bin.tmp.$$"
  rm -rf "$tmp"
  # GOTOOLCHAIN=local: never download another toolchain; -buildvcs=false: no VCS here.
  GOBIN="$tmp" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
    go install "github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@$VICTORIALOGS_VERSION"
  mv "$tmp/victoria-logs" "$bin"
  rm -rf "$tmp"
  echo "$VICTORIALOGS_VERSION" >"$stamp"
}

case "${1:-}" in
build) build ;;
path)
  build
  echo "$bin"
  ;;
*)
  echo "usage: sh scripts/victorialogs.sh build|path" >&2
  exit 2
  ;;
esac
