#!/bin/sh
# Starts or stops a single-node Apache Kafka 3.9 broker (KRaft, broker+controller in one
# JVM) for tests and local runs, on 127.0.0.1:$KAFKA_PORT (default 9092).
#
#   sh scripts/kafka.sh start    download (once) from Maven Central, format, start, wait
#   sh scripts/kafka.sh stop     stop the broker this script started on $KAFKA_PORT
#   sh scripts/kafka.sh status   exit 0 when that broker is running
#
# Kafka's jars come only from Maven Central: a generated pom depends on
# org.apache.kafka:kafka_2.13 (and an slf4j binding, which the distribution tarball
# bundles but the pom does not declare) and `mvn dependency:copy-dependencies` copies the
# runtime closure into .cache/kafka/<version>/libs (git-ignored, kept between runs; the
# Maven repository it uses is .cache/kafka/m2). Each start formats a fresh storage
# directory: topics and offsets do not survive a restart, which is what tests want.
set -eu
cd "$(dirname "$0")/.."
root=$PWD

KAFKA_VERSION=${KAFKA_VERSION:-3.9.1}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
KAFKA_HEAP=${KAFKA_HEAP:-512m}
KAFKA_START_TIMEOUT_S=${KAFKA_START_TIMEOUT_S:-120}

cache=$root/.cache/kafka
libs=$cache/$KAFKA_VERSION/libs
run=$cache/run-$KAFKA_PORT
pidfile=$run/kafka.pid
log=$run/logs/server.log

die() {
  echo "kafka.sh: $*" >&2
  exit 1
}

running() {
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

java_check() {
  command -v java >/dev/null 2>&1 || die "java not found: install a Java 17 runtime"
  version=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
  [ "${version:-0}" -ge 17 ] || die "Java 17 or newer required, found '${version:-unknown}'"
}

download() {
  [ -f "$libs/.complete" ] && return 0
  command -v mvn >/dev/null 2>&1 || die "mvn not found: Maven is needed to fetch Kafka from Maven Central"
  echo "kafka.sh: fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION from Maven Central into $libs"
  mkdir -p "$cache/$KAFKA_VERSION"
  cat >"$cache/$KAFKA_VERSION/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sieve</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <repositories>
    <repository><id>central</id><url>https://repo.maven.apache.org/maven2</url></repository>
  </repositories>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>1.7.36</version>
    </dependency>
  </dependencies>
</project>
POM
  rm -rf "$libs"
  mvn -q -B -Dstyle.color=never -f "$cache/$KAFKA_VERSION/pom.xml" -Dmaven.repo.local="$cache/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs" ||
    die "mvn could not fetch Kafka $KAFKA_VERSION"
  [ -f "$libs/kafka_2.13-$KAFKA_VERSION.jar" ] || die "kafka_2.13-$KAFKA_VERSION.jar missing after download"
  touch "$libs/.complete"
}

configure() {
  rm -rf "$run"
  mkdir -p "$run/data" "$run/logs"
  cat >"$run/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$run/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
PROPS
  cat >"$run/log4j.properties" <<LOG4J
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
LOG4J
}

java_cmd() {
  java "-Xmx$KAFKA_HEAP" "-Xms$KAFKA_HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
    "-Dlog4j.configuration=file:$run/log4j.properties" "-Dkafka.logs.dir=$run/logs" \
    -cp "$libs/*" "$@"
}

start() {
  if running; then
    echo "kafka.sh: already running on 127.0.0.1:$KAFKA_PORT (pid $(cat "$pidfile")), logs in $log"
    return 0
  fi
  java_check
  download
  configure
  cluster_id=$(java_cmd kafka.tools.StorageTool random-uuid | tail -n 1)
  java_cmd kafka.tools.StorageTool format -t "$cluster_id" -c "$run/server.properties" >"$run/logs/format.log" 2>&1 ||
    die "formatting storage failed, see $run/logs/format.log"
  nohup java "-Xmx$KAFKA_HEAP" "-Xms$KAFKA_HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
    "-Dlog4j.configuration=file:$run/log4j.properties" "-Dkafka.logs.dir=$run/logs" \
    -cp "$libs/*" kafka.Kafka "$run/server.properties" >"$run/logs/stdout.log" 2>&1 &
  echo $! >"$pidfile"
  echo "kafka.sh: starting Kafka $KAFKA_VERSION (pid $(cat "$pidfile")) on 127.0.0.1:$KAFKA_PORT; logs in $run/logs"
  waited=0
  # Waiting on another process's start-up: the broker logs this line once it serves clients.
  until grep -q "Kafka Server started" "$log" 2>/dev/null; do
    running || die "broker exited during start-up, see $log and $run/logs/stdout.log"
    [ "$waited" -lt "$KAFKA_START_TIMEOUT_S" ] || {
      stop
      die "broker not ready after ${KAFKA_START_TIMEOUT_S}s, see $log"
    }
    sleep 1
    waited=$((waited + 1))
  done
  echo "kafka.sh: ready on 127.0.0.1:$KAFKA_PORT after ${waited}s"
}

stop() {
  if ! running; then
    rm -f "$pidfile"
    echo "kafka.sh: not running on 127.0.0.1:$KAFKA_PORT"
    return 0
  fi
  pid=$(cat "$pidfile")
  kill "$pid"
  waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge 30 ]; then
      kill -9 "$pid" 2>/dev/null || true
      break
    fi
    sleep 1
    waited=$((waited + 1))
  done
  rm -f "$pidfile"
  echo "kafka.sh: stopped (logs kept in $run/logs until the next start)"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) running ;;
  *) die "usage: sh scripts/kafka.sh start|stop|status" ;;
esac
