#!/usr/bin/env bash
# Start Apache Kafka (jars from tools/kafka/fetch.sh) as one KRaft node that is
# both broker and controller, in the foreground:
#
#   tools/kafka/start-kraft.sh DATA_DIR PORT [--override KEY=VALUE ...]
#
# Clients connect to PLAINTEXT://127.0.0.1:PORT. DATA_DIR is the broker's
# log.dirs (partition directories <topic>-<partition>/ appear directly in it).
# The controller listens on 127.0.0.1:$CONTROLLER_PORT if that is set, else on
# the port of the previous run on DATA_DIR, else on a free port. Any
# --override KEY=VALUE goes to kafka.Kafka and wins over the file.
#
# The configuration is tools/kafka/server.properties plus the per-run lines,
# written to DATA_DIR/kraft-server.properties. A DATA_DIR without
# meta.properties is formatted first (kafka.tools.StorageTool) with a random
# cluster id; an already formatted one is started as it is, so running this
# again on the same DATA_DIR restarts the same node with its data.
#
# The script execs the JVM: its pid is the broker's, SIGTERM is a clean
# shutdown and SIGKILL a crash. Heap: KAFKA_HEAP_OPTS (default -Xmx1g);
# logging: WARN and up to stderr (see run-class.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ $# -lt 2 ]]; then
    echo "usage: $0 DATA_DIR PORT [--override KEY=VALUE ...]" >&2
    exit 2
fi
data_dir="$1"
port="$2"
shift 2
mkdir -p "$data_dir"
data_dir="$(cd "$data_dir" && pwd)"
config="$data_dir/kraft-server.properties"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

controller_port="${CONTROLLER_PORT:-}"
if [[ -z "$controller_port" && -f "$config" ]]; then
    controller_port="$(sed -n 's/^controller\.quorum\.voters=1@127\.0\.0\.1:\([0-9]*\)$/\1/p' "$config")"
fi
if [[ -z "$controller_port" ]]; then
    controller_port="$(free_port)"
fi
if [[ "$controller_port" == "$port" ]]; then
    echo "start-kraft.sh: controller port and broker port are both $port" >&2
    exit 2
fi

{
    cat "$here/server.properties"
    echo
    echo "# Written by start-kraft.sh for this data directory."
    echo "node.id=1"
    echo "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port"
    echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port"
    echo "controller.quorum.voters=1@127.0.0.1:$controller_port"
    echo "log.dirs=$data_dir"
} >"$config.tmp"
mv "$config.tmp" "$config"

if [[ ! -f "$data_dir/meta.properties" ]]; then
    # A Kafka Uuid: 16 random bytes, URL-safe base64 without padding; Kafka's
    # own generator avoids a leading '-' (it would read as a CLI flag).
    cluster_id="-"
    while [[ "$cluster_id" == -* ]]; do
        cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    done
    KAFKA_HEAP_OPTS="-Xmx256m" "$here/run-class.sh" kafka.tools.StorageTool format \
        --config "$config" --cluster-id "$cluster_id" >&2
fi

export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1g}"
exec "$here/run-class.sh" kafka.Kafka "$config" "$@"
