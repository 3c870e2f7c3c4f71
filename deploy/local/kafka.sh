#!/usr/bin/env bash
# A local single-node Kafka (KRaft: one combined broker + controller), from the Maven jars.
#
#   kafka.sh install   fetch org.apache.kafka:kafka_2.13 + runtime deps + log4j2 (slf4j 1.x binding)
#   kafka.sh start     fresh data dir, format storage, start, wait until ready, write env
#   kafka.sh stop
#   kafka.sh status
set -euo pipefail
EBB_COMPONENT=kafka
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KAFKA_HOME="${EBB_CACHE}/kafka-${KAFKA_VERSION}"
STATE="${EBB_INFRA_DIR}/kafka"
MAVEN_DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.6.1"

installed() { [[ -f "${KAFKA_HOME}/.complete" ]]; }

install() {
  if installed; then
    log "Kafka ${KAFKA_VERSION} already in ${KAFKA_HOME}"
    return 0
  fi
  need_cmd java "install a JDK >= 17 (apt-get install openjdk-17-jre-headless)"
  need_cmd mvn "install Maven (apt-get install maven)"
  local started=${SECONDS}
  log "fetching kafka_${KAFKA_SCALA_VERSION} ${KAFKA_VERSION} and its runtime dependencies with Maven"
  rm -rf "${KAFKA_HOME}"
  mkdir -p "${KAFKA_HOME}"
  cat >"${KAFKA_HOME}/pom.xml" <<EOF
<project>
  <modelVersion>4.0.0</modelVersion>
  <groupId>ebb.local</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_${KAFKA_SCALA_VERSION}</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
EOF
  mvn -B -Dstyle.color=never --no-transfer-progress -f "${KAFKA_HOME}/pom.xml" \
    "${MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="${KAFKA_HOME}/libs" >"${KAFKA_HOME}/maven.log" 2>&1 \
    || { tail -n 30 "${KAFKA_HOME}/maven.log" >&2; die "Maven could not fetch Kafka ${KAFKA_VERSION}; see ${KAFKA_HOME}/maven.log"; }
  [[ -f "${KAFKA_HOME}/libs/kafka_${KAFKA_SCALA_VERSION}-${KAFKA_VERSION}.jar" ]] || die "kafka jar missing after Maven"
  cat >"${KAFKA_HOME}/log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
EOF
  touch "${KAFKA_HOME}/.complete"
  log "Kafka ${KAFKA_VERSION}: $(find "${KAFKA_HOME}/libs" -name '*.jar' | wc -l) jars in $((SECONDS - started))s"
}

java_cmd() {
  printf '%s\n' java -Xms128m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=${KAFKA_HOME}/log4j2.properties" \
    "-Dkafka.logs.dir=${EBB_LOG_DIR}" -cp "${KAFKA_HOME}/libs/*"
}

kafka_ready() {
  tcp_open 127.0.0.1 "$1" && grep -q 'Kafka Server started' "$(log_file kafka)"
}

start() {
  install
  if is_running kafka; then
    log "already running (pid $(cat "$(pid_file kafka)"))"
    return 0
  fi
  local port cport cluster_id
  port="$(free_port)"
  cport="$(free_port)"
  while [[ "${cport}" == "${port}" ]]; do cport="$(free_port)"; done
  rm -rf "${STATE}"
  mkdir -p "${STATE}/data"
  cat >"${STATE}/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${cport}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${cport}
advertised.listeners=PLAINTEXT://127.0.0.1:${port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=${STATE}/data
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.retention.hours=24
EOF
  # a KRaft cluster id: a random UUID in URL-safe base64, never starting with "-" (StorageTool would read it as an
  # option; Kafka's own Uuid.randomUuid draws again for the same reason)
  cluster_id="$(python3 -c 'import base64, uuid
while (i := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"): pass
print(i)')"
  local -a java
  mapfile -t java < <(java_cmd)
  "${java[@]}" kafka.tools.StorageTool format --cluster-id "${cluster_id}" \
    --config "${STATE}/server.properties" --ignore-formatted >"$(log_file kafka-format)" 2>&1 \
    || { cat "$(log_file kafka-format)" >&2; die "kafka storage format failed; see $(log_file kafka-format)"; }
  spawn kafka "${java[@]}" kafka.Kafka "${STATE}/server.properties"
  wait_until kafka "${KAFKA_START_TIMEOUT:-120}" kafka_ready "${port}"
  write_component_env kafka "KAFKA_BOOTSTRAP=127.0.0.1:${port}" "EBB_KAFKA_BOOTSTRAP=127.0.0.1:${port}"
}

stop() {
  stop_pid kafka TERM
  remove_component_env kafka
}

status() { single_status kafka KAFKA_BOOTSTRAP; }

component_main "$@"
