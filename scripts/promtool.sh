#!/bin/sh
# Prometheus's promtool, to check deploy/prometheus/prometheus.yml and the Grafana
# dashboard's PromQL: `sh scripts/promtool.sh build|path`.
#
# Built from the Prometheus Go module with the machine's Go toolchain (no Docker, no
# downloaded binaries) and cached under .cache/promtool (git-ignored), as scripts/minio.sh
# builds MinIO: the first build takes minutes, later runs nothing. The version is the
# Prometheus image's in docker-compose.yml (Prometheus v3.15.0 is Go module v0.315.0).
# `go install promtool@version` refuses a module whose go.mod has replace directives, so it
# is built inside a module of its own here that carries Prometheus's one replace.
# `path` builds when needed, then prints the executable's path on stdout (nothing else).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

PROMETHEUS_MODULE_VERSION=v0.315.0

cache="$root/.cache/promtool"
bin="$cache/bin/promtool"
stamp="$cache/bin/version"

build() {
  if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$PROMETHEUS_MODULE_VERSION" ]; then
    return 0
  fi
  command -v go >/dev/null || {
    echo "promtool.sh: the Go toolchain is needed to build promtool" >&2
    exit 1
  }
  echo "promtool.sh: building promtool $PROMETHEUS_MODULE_VERSION (first run only, takes minutes)" >&2
  mod="$cache/module.$$"
  rm -rf "$mod"
  mkdir -p "$mod" "$cache/bin"
  cat >"$mod/go.mod" <<MOD
module sieve.local/promtool

go 1.26.0

// Prometheus's own go.mod has this replace; a module that requires Prometheus must repeat it.
replace cloud.google.com/go => cloud.google.com/go v0.123.0
MOD
  # GOTOOLCHAIN=local: never download another toolchain; -buildvcs=false: no VCS here.
  (
    cd "$mod"
    GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
      go get "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE_VERSION"
    GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
      go build -o "$bin.tmp" github.com/prometheus/prometheus/cmd/promtool
  ) >&2
  mv "$bin.tmp" "$bin"
  rm -rf "$mod"
  echo "$PROMETHEUS_MODULE_VERSION" >"$stamp"
}

case "${1:-}" in
build) build ;;
path)
  build
  echo "$bin"
  ;;
*)
  echo "usage: sh scripts/promtool.sh build|path" >&2
  exit 2
  ;;
esac
