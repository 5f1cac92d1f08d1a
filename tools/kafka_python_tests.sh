#!/usr/bin/env bash
# kafka-python's own integration tests for ElectLeaders, AlterPartitionReassignments and
# ListPartitionReassignments against a three-broker josefk cluster (make kafka-python-tests).
#
# The tests come from kafka-python's git repository (tools/kafka_python/checkout.sh: from
# KAFKA_PYTHON_REPO, default GitHub, at the tag of the installed version or else the newest
# release tag before it, into .cache/kafka-python-tests; test/ and servers/resources/ only:
# the installed client is what runs). The cluster is tools/cluster.py on ports of its own
# (ZooKeeper 22990, brokers 29092-29094) with its data in a temporary directory; it is
# stopped (controlled shutdown) at the end. Extra pytest arguments are passed through:
# tools/kafka_python_tests.sh -k elect. The SSL and SASL tests are
# tools/kafka_python_security_tests.sh (make kafka-python-tests runs both).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
py="$root/.venv/bin/python"
cache="$("$here/kafka_python/checkout.sh")"

work="$(mktemp -d)"
"$py" "$root/tools/cluster.py" --dir "$work/cluster" --zk-port 22990 --first-port 29092 \
    >"$work/cluster.out" 2>&1 &
cluster=$!
stop() {
    kill -TERM "$cluster" 2>/dev/null || true
    wait "$cluster" 2>/dev/null || true
    rm -rf "$work"
}
trap stop EXIT
timeout 120 sh -c "until grep -q '^bootstrap:' '$work/cluster.out'; do sleep 0.5; done" || {
    cat "$work/cluster.out" >&2
    exit 1
}
mkdir -p "$work/kafka-root"
cd "$cache"
# KAFKA_VERSION enables kafka-python's integration tests; KAFKA_URI points them at an
# external broker; KAFKA_ROOT must name an existing directory even then.
KAFKA_VERSION=3.9 KAFKA_URI=PLAINTEXT://127.0.0.1:29092 KAFKA_ROOT="$work/kafka-root" \
    timeout 600 "$py" -m pytest test/integration/test_admin_integration.py \
    -k "elect_leaders or partition_reassignments" --timeout=120 \
    -p no:cacheprovider -p no:trio -v "$@"
