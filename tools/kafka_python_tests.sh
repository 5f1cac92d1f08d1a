#!/usr/bin/env bash
# kafka-python's own integration tests for ElectLeaders, AlterPartitionReassignments and
# ListPartitionReassignments against a three-broker josefk cluster (make kafka-python-tests).
#
# The tests come from kafka-python's git repository at the installed version's tag, into
# .cache/kafka-python-tests (test/ only: the installed client is what runs). The
# cluster is tools/cluster.py on ports of its own (ZooKeeper 22990, brokers 29092-29094)
# with its data in a temporary directory; it is stopped (controlled shutdown) at the end.
# Extra pytest arguments are passed through: tools/kafka_python_tests.sh -k elect
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
py="$root/.venv/bin/python"
version="$("$py" -c 'import kafka; print(kafka.__version__)')"
cache="$root/.cache/kafka-python-tests/$version"

if [[ ! -d "$cache/test/integration" ]]; then
    # kafka-python's sdist leaves half of test/ out: take it from the git tag (the tag
    # name is the version), test/ and the top-level files only. kafka/ stays out, or it
    # would shadow the installed client, which is what the tests must exercise.
    rm -rf "$cache"
    git clone --quiet --filter=blob:none --no-checkout \
        "${KAFKA_PYTHON_REPO:-https://github.com/dpkp/kafka-python.git}" "$cache"
    git -C "$cache" sparse-checkout set test
    git -C "$cache" checkout --quiet "${KAFKA_PYTHON_REF:-$version}"
fi

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
