#!/usr/bin/env bash
# Start an Apache Kafka 3.9 broker in ZooKeeper mode (jars from
# tools/kafka39/fetch.sh) in the foreground, as kafka-server-start.sh does:
#
#   tools/kafka39/start-zk-broker.sh SERVER_PROPERTIES [--override KEY=VALUE ...]
#
# The properties need at least zookeeper.connect, broker.id, listeners and
# log.dirs; --override KEY=VALUE wins over the file. A minimal file:
#
#   zookeeper.connect=127.0.0.1:2181/josefk
#   broker.id=1
#   listeners=PLAINTEXT://127.0.0.1:9092
#   log.dirs=/tmp/kafka-1
#
# The script execs the JVM: its pid is the broker's, SIGTERM is a controlled
# shutdown and SIGKILL a crash. Logging: INFO and up to stdout
# (tools/kafka39/log4j-broker.properties). Heap: KAFKA_HEAP_OPTS (default
# -Xmx512m).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -lt 1 ]]; then
    echo "usage: $0 SERVER_PROPERTIES [--override KEY=VALUE ...]" >&2
    exit 2
fi
export KAFKA_OPTS="-Dlog4j.configuration=file:$here/log4j-broker.properties ${KAFKA_OPTS:-}"
exec "$here/run-class.sh" kafka.Kafka "$@"
