#!/usr/bin/env bash
# Run a class from Apache Kafka 3.9's jars (fetched by tools/kafka39/fetch.sh):
#
#   tools/kafka39/run-class.sh CLASS [ARGS...]
#   e.g. tools/kafka39/run-class.sh org.apache.kafka.tools.TopicCommand \
#            --bootstrap-server 127.0.0.1:9092 --describe
#
# Kafka 3.9's shell scripts and the classes they run:
#   kafka-server-start.sh          kafka.Kafka server.properties (see start-zk-broker.sh)
#   kafka-topics.sh                org.apache.kafka.tools.TopicCommand
#   kafka-reassign-partitions.sh   org.apache.kafka.tools.reassign.ReassignPartitionsCommand
#   kafka-leader-election.sh       org.apache.kafka.tools.LeaderElectionCommand
#   kafka-configs.sh               kafka.admin.ConfigCommand
#   kafka-console-producer.sh      kafka.tools.ConsoleProducer
#   kafka-console-consumer.sh      org.apache.kafka.tools.consumer.ConsoleConsumer
#   zookeeper-shell.sh             org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka -server HOST:PORT
#
# Works from any directory. Logging: tools/kafka39/log4j.properties (log4j 1.x
# via reload4j; WARN and up to stderr). Heap: -Xmx512m unless KAFKA_HEAP_OPTS
# says otherwise; KAFKA_OPTS adds JVM options (a later
# -Dlog4j.configuration=... wins). The exit status is the tool's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -lt 1 ]]; then
    echo "usage: $0 CLASS [ARGS...]" >&2
    exit 2
fi
# shellcheck disable=SC2086  # the *_OPTS variables are word lists on purpose
exec "$here/../zookeeper/run-jars.sh" .cache/kafka39/libs tools/kafka39/fetch.sh \
    ${KAFKA_HEAP_OPTS:--Xmx512m} \
    -Dlog4j.configuration="file:$here/log4j.properties" \
    ${KAFKA_OPTS:-} \
    -- "$@"
