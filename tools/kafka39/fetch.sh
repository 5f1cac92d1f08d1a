#!/usr/bin/env bash
# Fetch Apache Kafka 3.9's jars (listed in tools/kafka39/pom.xml) from Maven
# Central into <repo>/.cache/kafka39/libs, for tools/kafka39/run-class.sh: the
# ZooKeeper-mode reference broker of the cluster tests (compat_tests/cluster).
# Idempotent, one line of output: see tools/zookeeper/fetch-jars.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/../zookeeper/fetch-jars.sh" kafka39 "$here/pom.xml" kafka.version .cache/kafka39/libs
