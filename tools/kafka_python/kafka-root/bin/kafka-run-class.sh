#!/usr/bin/env bash
# kafka-python's fixtures run $KAFKA_ROOT/bin/<script>.sh; in this KAFKA_ROOT every script
# is this one (the others are symlinks to it) and tools/kafka_python/shim.py decides, by
# the name it was called by, what really runs: josefk, ZooKeeper 3.8 or a Kafka 3.9 tool.
# It execs all the way down, so the fixture's pid is the server's.
set -euo pipefail
shim="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
root="$(cd "$shim/../.." && pwd)"
exec "$root/.venv/bin/python" "$shim/shim.py" "$(basename "$0")" "$@"
