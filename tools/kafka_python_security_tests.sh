#!/usr/bin/env bash
# kafka-python's own SSL and SASL integration tests against josefk (make kafka-python-tests):
# test/integration/test_sasl_integration.py (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 over
# SASL_PLAINTEXT) and test/integration/test_ssl_integration.py, from kafka-python's git
# repository (tools/kafka_python/checkout.sh: KAFKA_PYTHON_REPO, the tag of the installed
# version or the newest one before it).
#
# The tests start their brokers themselves, as in kafka-python's CI: KafkaFixture renders
# servers/resources/1.0/kafka.properties (KAFKA_VERSION=3.9: ZooKeeper mode, one broker), a
# JAAS file and JKS stores, adds SCRAM users with kafka-configs.sh --zookeeper and runs
# $KAFKA_ROOT/bin/kafka-run-class.sh. KAFKA_ROOT is tools/kafka_python/kafka-root, where
# that runs josefk on the translated properties (JKS -> PKCS12, JAAS -> listener
# sasl.jaas.config keys), Apache ZooKeeper 3.8 and Apache Kafka 3.9.1's admin tools: see
# tools/kafka_python/shim.py. Needs make zookeeper-jars kafka39-jars, java and keytool.
# Extra pytest arguments are passed through: tools/kafka_python_security_tests.sh -k scram
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
py="$root/.venv/bin/python"
cache="$("$here/kafka_python/checkout.sh")"

cd "$cache"
# Without KAFKA_URI the fixtures spawn their own brokers (with it, these tests skip).
unset KAFKA_URI ZOOKEEPER_URI
KAFKA_VERSION=3.9 KAFKA_ROOT="$here/kafka_python/kafka-root" \
    timeout 900 "$py" -m pytest test/integration/test_sasl_integration.py \
    test/integration/test_ssl_integration.py --timeout=180 \
    -p no:cacheprovider -p no:trio -v "$@"
