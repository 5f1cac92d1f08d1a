#!/usr/bin/env bash
# Fetch Apache ZooKeeper's server jars (listed in tools/zookeeper/pom.xml) from
# Maven Central into <repo>/.cache/zookeeper/libs, for tools/zookeeper/start.sh
# and the cluster tests (compat_tests/cluster). Idempotent, one line of output:
# see tools/zookeeper/fetch-jars.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/fetch-jars.sh" zookeeper "$here/pom.xml" zookeeper.version .cache/zookeeper/libs
