#!/bin/sh
# Grafana Loki and logcli for `pnpm bench:peers`: `sh scripts/loki.sh build|path|logcli`.
#
# Built from the Go module proxy with the machine's Go (no Docker, no downloaded binaries)
# through the module in scripts/loki/ (its go.mod says why it exists), and cached under
# .cache/loki (git-ignored): the first build takes about 15 minutes on two cores. `path`
# prints the loki binary's path, building it first if needed; `logcli` the logcli one.
# The bench starts and stops Loki itself, with a configuration of its own.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
module="$root/scripts/loki"
# The version the module requires: change it there (and go.sum) and the next use rebuilds.
version=$(sed -n 's/^require github.com\/grafana\/loki\/v3 \(v[^ ]*\)$/\1/p' "$module/go.mod")
cache="$root/.cache/loki"
stamp="$cache/bin/version"

build() {
  if [ -x "$cache/bin/loki" ] && [ -x "$cache/bin/logcli" ] &&
    [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
    return 0
  fi
  command -v go >/dev/null || {
    echo "loki.sh: the Go toolchain is needed to build Loki (go build)" >&2
    exit 1
  }
  echo "loki.sh: building Loki and logcli $version (first run only, takes minutes)" >&2
  mkdir -p "$cache/bin"
  tmp="$cache/bin.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # GOTOOLCHAIN=local: never download another toolchain; -buildvcs=false: no VCS here.
  (cd "$module" &&
    GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=mod" CGO_ENABLED=0 \
      go build -o "$tmp/loki" github.com/grafana/loki/v3/cmd/loki &&
    GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=mod" CGO_ENABLED=0 \
      go build -o "$tmp/logcli" github.com/grafana/loki/v3/cmd/logcli)
  mv "$tmp/loki" "$tmp/logcli" "$cache/bin/"
  rm -rf "$tmp"
  echo "$version" >"$stamp"
}

case "${1:-}" in
build) build ;;
path)
  build
  echo "$cache/bin/loki"
  ;;
logcli)
  build
  echo "$cache/bin/logcli"
  ;;
*)
  echo "usage: sh scripts/loki.sh build|path|logcli" >&2
  exit 2
  ;;
esac
