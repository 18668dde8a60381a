#!/bin/sh
# Sieve's cluster without Docker: `sh scripts/cluster.sh start|stop|status|install`.
#
# The topology of docker-compose.yml as local processes: Kafka and MinIO as the test setup
# starts them (scripts/kafka.sh, scripts/minio.sh) but on their own ports, two
# distributors, two ingesters (one consumer group), two bloom gateways and two queriers
# (`node apps/sieve/dist/main.js <role>` with deploy/sieve/common.yaml and the role's
# file, only addresses, ports and instance ids overridden by SIEVE_* variables), and nginx
# as the one entry point with deploy/nginx/routes.conf. Push and query at
# http://127.0.0.1:$CLUSTER_PORT (default 3100); the roles take the next 9 ports.
#
#   start    build if needed, install nginx if missing (Debian's package), start Kafka and
#            MinIO, create the bucket, then whatever role is not running, waiting on every
#            /ready (run it again to bring back an instance that died)
#   stop     stop everything it started: SIGTERM, then SIGKILL after CLUSTER_STOP_GRACE_S
#            (30); Kafka's and MinIO's data go with them, as the test servers'
#   status   what runs and what each /ready answers; exit 0 only when all is up
#   install  only install nginx (scripts/test.sh does, before the suite)
#
# The Sieve half is apps/sieve/src/cluster/launch.ts (Node: it reads the configs with
# Sieve's own loader, creates the bucket with the S3 SDK, waits on HTTP); this script does
# what shell does well: build, install, and reuse the Kafka and MinIO scripts.
#
# Environment: CLUSTER_PORT (3100), CLUSTER_HOST (127.0.0.1), CLUSTER_DIR (state, logs,
# data: .cache/cluster), CLUSTER_KAFKA_PORT (19092; the controller takes the next port),
# CLUSTER_MINIO_PORT (19000; its console the next), CLUSTER_CONFIG_FILE (one more YAML
# laid over the role's files). CLUSTER_KAFKA_BROKERS and CLUSTER_S3_ENDPOINT use servers
# already running instead of starting them (the tests use the suite's, with their own
# bucket and topic in CLUSTER_CONFIG_FILE; S3 credentials are then the caller's AWS_*).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

CLUSTER_DIR=${CLUSTER_DIR:-$root/.cache/cluster}
CLUSTER_KAFKA_PORT=${CLUSTER_KAFKA_PORT:-19092}
CLUSTER_MINIO_PORT=${CLUSTER_MINIO_PORT:-19000}
launcher=$root/apps/sieve/dist/cluster/launch.js
# Which of Kafka and MinIO this script started (and so stops): one file each.
own=$CLUSTER_DIR/own
export CLUSTER_DIR

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

build() {
  [ -f "$launcher" ] && [ -f "$root/apps/sieve/dist/main.js" ] && return 0
  echo "cluster.sh: building (apps/sieve/dist is missing)" >&2
  sh scripts/pnpm.sh --version >/dev/null
  PATH="$root/.tools/node_modules/.bin:$PATH" pnpm install --frozen-lockfile >&2
  PATH="$root/.tools/node_modules/.bin:$PATH" pnpm exec tsc -b >&2
}

install_nginx() {
  command -v nginx >/dev/null 2>&1 && return 0
  [ -x /usr/sbin/nginx ] && return 0
  command -v apt-get >/dev/null || die "nginx is missing and apt-get is not available to install it"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null || die "nginx is missing; installing it needs root or passwordless sudo (run: sudo apt-get install -y nginx)"
    sudo="sudo -n"
  fi
  echo "cluster.sh: installing Debian's nginx package (first run only)" >&2
  # The package's own service is not wanted (and policy-rc.d often forbids it): the
  # cluster runs its own nginx with its own prefix.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends nginx >&2 ||
    die "apt-get could not install nginx"
}

start_servers() {
  mkdir -p "$own"
  if [ -z "${CLUSTER_KAFKA_BROKERS:-}" ]; then
    KAFKA_PORT=$CLUSTER_KAFKA_PORT sh scripts/kafka.sh start >&2
    touch "$own/kafka"
    CLUSTER_KAFKA_BROKERS=127.0.0.1:$CLUSTER_KAFKA_PORT
  fi
  if [ -z "${CLUSTER_S3_ENDPOINT:-}" ]; then
    MINIO_PORT=$CLUSTER_MINIO_PORT sh scripts/minio.sh start
    touch "$own/minio"
    CLUSTER_S3_ENDPOINT=http://127.0.0.1:$CLUSTER_MINIO_PORT
    # minio.sh's fixed credentials, for the roles' S3 clients.
    AWS_ACCESS_KEY_ID=sieve-test AWS_SECRET_ACCESS_KEY=sieve-test-secret AWS_REGION=us-east-1
    export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
  fi
  export CLUSTER_KAFKA_BROKERS CLUSTER_S3_ENDPOINT
}

stop_servers() {
  if [ -f "$own/kafka" ]; then
    KAFKA_PORT=$CLUSTER_KAFKA_PORT sh scripts/kafka.sh stop >&2
    rm -f "$own/kafka"
  fi
  if [ -f "$own/minio" ]; then
    MINIO_PORT=$CLUSTER_MINIO_PORT sh scripts/minio.sh stop
    rm -f "$own/minio"
  fi
}

case "${1:-}" in
start)
  build
  install_nginx
  start_servers
  node "$launcher" start
  ;;
stop)
  if [ -f "$launcher" ]; then
    node "$launcher" stop
  fi
  stop_servers
  ;;
install)
  # What `start` installs besides the build (nginx), for a test setup to do up front.
  install_nginx
  ;;
status)
  [ -f "$launcher" ] || die "not built (apps/sieve/dist is missing): nothing started"
  node "$launcher" status
  ;;
*)
  die "usage: sh scripts/cluster.sh start|stop|status|install"
  ;;
esac
