#!/bin/sh
# `npm test`: install, build, type-check, lint, check formatting, run the whole suite (and
# its unit tests again on the image's Node).
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
# A test that starts servers or processes must be named *.int.test.ts (the integration project).
sh scripts/classify-tests.sh --check
# Real servers for the integration tests. Each adds its stop command to $on_exit, which
# the one EXIT trap runs (a second `trap ... EXIT` would replace the first).
on_exit=":"
trap 'eval "$on_exit"' EXIT
trap 'exit 130' INT TERM
# MinIO for the S3 tests: built once from its Go module into .cache/minio, fresh data.
# One already started by `sh scripts/minio.sh start` is used and left running.
if ! sh scripts/minio.sh status; then
  sh scripts/minio.sh start
  on_exit="sh scripts/minio.sh stop; $on_exit"
fi
S3_ENDPOINT="http://127.0.0.1:${MINIO_PORT:-9000}"
AWS_ACCESS_KEY_ID=sieve-test AWS_SECRET_ACCESS_KEY=sieve-test-secret AWS_REGION=us-east-1
export S3_ENDPOINT AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
# Kafka for the queue tests: Apache Kafka 3.9 (KRaft) from Maven Central into .cache/kafka.
# A broker already running on the port (started by hand) is used and left running.
if ! sh scripts/kafka.sh status; then
  sh scripts/kafka.sh start
  on_exit="sh scripts/kafka.sh stop; $on_exit"
fi
KAFKA_BROKERS="127.0.0.1:${KAFKA_PORT:-9092}"
export KAFKA_BROKERS
# Chromium for the experiment report's browser test: Debian's package, installed here
# (outside any test's timeout) when missing; a machine that cannot install it fails.
sh scripts/chromium.sh install
# The Compose CLI, which validates docker-compose.yml (apps/sieve/src/compose.int.test.ts):
# Debian's docker-compose, installed here when no `docker compose` is on the machine.
sh scripts/compose.sh install
sh scripts/cluster.sh install
# promtool, which checks deploy/prometheus and the Grafana dashboard's PromQL
# (apps/sieve/src/promtool.int.test.ts): built from the Prometheus Go module into
# .cache/promtool on first use (about 9 minutes on a cold Go cache, 15 s on a warm one).
sh scripts/promtool.sh build
# Loki's logcli, which the logcli tests run: built with Loki from the Go module proxy into
# .cache/loki on first use (about 15 minutes cold), here rather than inside a test file,
# whose worker would be blocked past vitest's 60-second RPC deadline.
sh scripts/loki.sh build
pnpm run vitest
# The unit tests again on the Node the image runs (the Dockerfile's base), when the
# machine's Node is another major version: that Node from the npm registry's `node` package
# and re2 built for it, cached in .cache/node-lts (scripts/node-lts.sh).
sh scripts/node-lts.sh test-unit
