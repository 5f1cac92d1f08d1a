#!/usr/bin/env bash
# kafka-python's whole integration suite against ONE broker (make kafka-python-one-broker):
# test/integration/ from kafka-python's git repository (tools/kafka_python/checkout.sh), with
# KAFKA_VERSION=4.0.0 and KAFKA_URI pointing at a broker this script starts on a free port
# with its data in a temporary directory, and stops (SIGTERM) at the end:
#
#   tools/kafka_python_one_broker.sh [--kafka] [pytest arguments]
#
# Without --kafka the broker is josefk (python -m josefk.server serve); with --kafka it is
# Apache Kafka 4.3.1 as one KRaft node (tools/kafka/start-kraft.sh), the reference: a test
# that fails there is not josefk's to pass. Both brokers get the settings kafka-python's
# KafkaFixture would render (4 partitions, StandardAuthorizer allowing everyone, ...). The
# SSL and SASL tests start brokers of their own (tools/kafka_python_security_tests.sh) and
# are left out. On josefk two more are: test_describe_metadata_quorum (KRaft only) and
# test_kafka_version_infer, which expects KAFKA_VERSION's (4, 0) where kafka-python infers
# (4, 3) from josefk's versions, as it does from Kafka 4.3.1's (it fails there too). The
# broker's output is kept in $KAFKA_PYTHON_BROKER_LOG if that is set. Extra arguments go
# to pytest: tools/kafka_python_one_broker.sh -k admin
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
py="$root/.venv/bin/python"
kind=josefk
skip=(--deselect test/integration/test_admin_integration.py::test_describe_metadata_quorum
      --deselect test/integration/test_consumer_integration.py::test_kafka_version_infer)
if [[ "${1:-}" == "--kafka" ]]; then
    kind=kafka
    skip=()
    shift
fi
cache="$("$here/kafka_python/checkout.sh")"

work="$(mktemp -d)"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="${KAFKA_PYTHON_BROKER_LOG:-$work/broker.log}"
# The settings kafka-python's KafkaFixture renders (servers/resources/default/kafka.properties
# with its default of 4 partitions): the tests count on them.
overrides=()
for kv in num.partitions=4 default.replication.factor=1 offsets.topic.num.partitions=2 \
          group.min.session.timeout.ms=1000 group.initial.rebalance.delay.ms=0 \
          authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
          allow.everyone.if.no.acl.found=true; do
    overrides+=(--override "$kv")
done
if [[ "$kind" == kafka ]]; then
    "$here/kafka/start-kraft.sh" "$work/data" "$port" "${overrides[@]}" >"$log" 2>&1 &
else
    # advertised.listeners as the fixture renders it (start-kraft.sh sets it for Kafka).
    "$py" -m josefk.server serve --override "listeners=PLAINTEXT://127.0.0.1:$port" \
        --override "advertised.listeners=PLAINTEXT://127.0.0.1:$port" \
        --override "log.dirs=$work/data" "${overrides[@]}" >"$log" 2>&1 &
fi
broker=$!
stop() {
    kill -TERM "$broker" 2>/dev/null || true
    wait "$broker" 2>/dev/null || true
    rm -rf "$work"
}
trap stop EXIT
# Ready once Metadata lists the broker (Kafka's socket opens before its controller is up).
"$py" - "127.0.0.1:$port" "$broker" <<'EOF' || { cat "$log" >&2; exit 1; }
import os, sys, time
from kafka import KafkaAdminClient
bootstrap, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 180
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("the broker exited")
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        if admin.describe_cluster()["brokers"]:
            admin.close()
            break
    except Exception:
        if time.monotonic() > deadline:
            raise
    time.sleep(0.5)
EOF
echo "kafka-python's integration tests against $kind on 127.0.0.1:$port" >&2
mkdir -p "$work/kafka-root"
cd "$cache"
# KAFKA_ROOT must name an existing directory even with KAFKA_URI.
KAFKA_VERSION=4.0.0 KAFKA_URI="PLAINTEXT://127.0.0.1:$port" KAFKA_ROOT="$work/kafka-root" \
    timeout 1800 "$py" -m pytest test/integration --timeout=180 \
    --ignore=test/integration/test_ssl_integration.py \
    --ignore=test/integration/test_sasl_integration.py \
    -p no:cacheprovider -p no:trio -rfEs ${skip[@]+"${skip[@]}"} "$@"
