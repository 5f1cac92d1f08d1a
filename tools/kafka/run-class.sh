#!/usr/bin/env bash
# Run a class from Apache Kafka's jars (fetched by tools/kafka/fetch.sh):
#
#   tools/kafka/run-class.sh CLASS [ARGS...]
#   e.g. tools/kafka/run-class.sh org.apache.kafka.tools.DumpLogSegments \
#            --files 00000000000000000000.log --print-data-log
#        tools/kafka/run-class.sh org.apache.kafka.tools.consumer.ConsoleConsumer \
#            --bootstrap-server localhost:9092 --topic t --from-beginning
#
# Works from any directory (relative file arguments stay relative to the
# caller's). Logging: tools/kafka/log4j2.properties (WARN and up to stderr).
# Heap: -Xmx512m unless KAFKA_HEAP_OPTS says otherwise; KAFKA_OPTS adds JVM
# options (e.g. a different -Dlog4j2.configurationFile, which wins as it comes
# later). Otherwise JVM defaults, so perf tools run on the normal JIT and GC.
# The exit status is the tool's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
libs="$root/.cache/kafka/libs"

if [[ $# -lt 1 ]]; then
    echo "usage: $0 CLASS [ARGS...]" >&2
    exit 2
fi
if ! compgen -G "$libs/*.jar" >/dev/null; then
    echo "run-class.sh: no Kafka jars in $libs; run tools/kafka/fetch.sh first" >&2
    exit 1
fi

java="java"
if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
    java="$JAVA_HOME/bin/java"
fi

# shellcheck disable=SC2086  # the *_OPTS variables are word lists on purpose
exec "$java" ${KAFKA_HEAP_OPTS:--Xmx512m} \
    -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$here/log4j2.properties" \
    ${KAFKA_OPTS:-} \
    -cp "$libs/*" "$@"
