#!/bin/sh
# MinIO for the S3 tests: `sh scripts/minio.sh build|start|stop|status`.
#
# MinIO is built from its Go module with the machine's Go toolchain (no Docker, no
# downloaded binaries) and cached under .cache/minio (git-ignored), so only the first run
# pays for the build (several minutes on two cores). `start` runs one server on
# 127.0.0.1:$MINIO_PORT (default 9000) with a fresh data directory and the fixed test
# credentials below, waits until /minio/health/live answers, and writes a pid file.
# It creates no bucket: each test suite creates its own. `stop` ends that server;
# `status` exits 0 when it is running and answers.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

# The newest MinIO module version the Go module proxy served when this was written
# (MinIO publishes pseudo-versions only); its go.mod asks for Go 1.24, which the local
# toolchain satisfies. Change it here and the next `start` rebuilds.
MINIO_MODULE_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
MINIO_PORT=${MINIO_PORT:-9000}
MINIO_CONSOLE_PORT=${MINIO_CONSOLE_PORT:-$((MINIO_PORT + 1))}
# Fixed credentials for tests only; scripts/test.sh exports the same ones for the SDK.
MINIO_ROOT_USER=${MINIO_ROOT_USER:-sieve-test}
MINIO_ROOT_PASSWORD=${MINIO_ROOT_PASSWORD:-sieve-test-secret}

cache="$root/.cache/minio"
bin="$cache/bin/minio"
stamp="$cache/bin/version"
data="$cache/data-$MINIO_PORT"
pidfile="$cache/minio-$MINIO_PORT.pid"
log="$cache/minio-$MINIO_PORT.log"

build() {
  if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$MINIO_MODULE_VERSION" ]; then
    return 0
  fi
  command -v go >/dev/null || {
    echo "minio.sh: the Go toolchain is needed to build MinIO (go install)" >&2
    exit 1
  }
  echo "minio.sh: building MinIO $MINIO_MODULE_VERSION (first run only, takes minutes)" >&2
  mkdir -p "$cache/bin"
  tmp="$cache/bin.tmp.$$"
  rm -rf "$tmp"
  # GOTOOLCHAIN=local: never download another toolchain; -buildvcs=false: no VCS here.
  GOBIN="$tmp" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
    go install "github.com/minio/minio@$MINIO_MODULE_VERSION"
  mv "$tmp/minio" "$bin"
  rm -rf "$tmp"
  echo "$MINIO_MODULE_VERSION" >"$stamp"
}

running() {
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

live() {
  node -e '
    const req = require("node:http").get(process.argv[1], { timeout: 1000 }, (res) => {
      process.exit(res.statusCode === 200 ? 0 : 1);
    });
    req.on("error", () => process.exit(1));
    req.on("timeout", () => { req.destroy(); process.exit(1); });
  ' "http://127.0.0.1:$MINIO_PORT/minio/health/live"
}

start() {
  build
  if running; then
    echo "minio.sh: already running (pid $(cat "$pidfile")) on 127.0.0.1:$MINIO_PORT" >&2
    return 0
  fi
  rm -rf "$data"
  mkdir -p "$data"
  MINIO_ROOT_USER="$MINIO_ROOT_USER" MINIO_ROOT_PASSWORD="$MINIO_ROOT_PASSWORD" \
    MINIO_UPDATE=off MINIO_BROWSER=off \
    nohup "$bin" server --quiet --address "127.0.0.1:$MINIO_PORT" \
    --console-address "127.0.0.1:$MINIO_CONSOLE_PORT" "$data" >"$log" 2>&1 &
  echo $! >"$pidfile"
  # Wait for the health endpoint (at most 60 s), failing early if the process died.
  i=0
  until live; do
    if ! running; then
      echo "minio.sh: MinIO exited during start; its log ($log):" >&2
      cat "$log" >&2
      rm -f "$pidfile"
      exit 1
    fi
    i=$((i + 1))
    if [ "$i" -ge 120 ]; then
      echo "minio.sh: MinIO did not answer /minio/health/live within 60 s; log: $log" >&2
      stop
      exit 1
    fi
    sleep 0.5
  done
  echo "minio.sh: MinIO up on http://127.0.0.1:$MINIO_PORT (pid $(cat "$pidfile"))" >&2
}

stop() {
  if ! [ -f "$pidfile" ]; then
    return 0
  fi
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    i=0
    while kill -0 "$pid" 2>/dev/null; do
      i=$((i + 1))
      if [ "$i" -ge 40 ]; then
        kill -9 "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.25
    done
  fi
  rm -f "$pidfile"
  rm -rf "$data"
}

case "${1:-}" in
build) build ;;
start) start ;;
stop) stop ;;
status) running && live ;;
*)
  echo "usage: sh scripts/minio.sh build|start|stop|status" >&2
  exit 2
  ;;
esac
