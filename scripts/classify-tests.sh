#!/bin/sh
# Which vitest project runs each test file, as vitest.config.ts decides (`vitest list`):
#   sh scripts/classify-tests.sh           one line per file: "unit <path>" or "integration <path>"
#   sh scripts/classify-tests.sh --check   exits 1 when a unit test file looks like an
#                                          integration test (a hint, from the markers below)
# A unit test is pure and in-process; an integration test uses Kafka, S3/MinIO, a server on
# loopback, a child process or a worker thread. See README's "Testing".
set -eu
cd "$(dirname "$0")/.."

# What makes a file an integration test, as it appears in the file itself; a helper that
# starts a server or a process is named here (spawnSieve, startDistributor). A hint only:
# apps/sieve's fuzz.int.test.ts reaches `sieve` through runFuzz, which it does not catch. A
# thread is `new Worker(`: a MessageChannel between two ends in one thread is a unit test.
MARKERS='\.listen\(|node:child_process|new Worker\(|piscina|QueryPool|\bKAFKA_BROKERS\b|kafkaBrokers|\bS3_ENDPOINT\b|s3Endpoint|startPrivateMinio|startDistributor|spawnSieve|startSieve|dist/main\.js'

list() {
  # `--filesOnly` globs without loading a test file or running the global setup.
  ./node_modules/.bin/vitest list --filesOnly | sed -n 's/^\[\([a-z]*\)\] /\1 /p' | sort -k2
}

case "${1:-}" in
"")
  list
  ;;
--check)
  status=0
  for path in $(list | awk '$1 == "unit" { print $2 }'); do
    if grep -qE "$MARKERS" "$path"; then
      echo "unit test looks like an integration test: $path ($(grep -oE "$MARKERS" "$path" | sort -u | tr '\n' ' '))"
      status=1
    fi
  done
  exit "$status"
  ;;
*)
  echo "usage: sh scripts/classify-tests.sh [--check]" >&2
  exit 2
  ;;
esac
