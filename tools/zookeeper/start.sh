#!/usr/bin/env bash
# Start a standalone Apache ZooKeeper server (jars from tools/zookeeper/fetch.sh)
# in the foreground:
#
#   tools/zookeeper/start.sh PORT DATA_DIR [ADDRESS]
#
# It listens on ADDRESS:PORT (default 127.0.0.1) and keeps its snapshots and transaction log in
# DATA_DIR (created if missing; running again on the same DATA_DIR restarts
# the same server with its data). The configuration is written to
# DATA_DIR/zoo.cfg: ZooKeeper's defaults (tickTime 2000, so session timeouts
# of 4 to 40 s) with no per-address connection limit and no admin server.
# Equivalent by hand, with ZooKeeper's defaults for everything else:
#
#   java -cp '.cache/zookeeper/libs/*' org.apache.zookeeper.server.ZooKeeperServerMain PORT DATA_DIR
#
# The script execs the JVM: its pid is the server's, SIGTERM stops it.
# Logging: WARN and up to stdout (tools/zookeeper/logback.xml). Heap:
# ZK_HEAP_OPTS (default -Xmx128m). Starts in about 1-2 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 PORT DATA_DIR [ADDRESS]" >&2
    exit 2
fi
port="$1"
address="${3:-127.0.0.1}"
mkdir -p "$2"
data_dir="$(cd "$2" && pwd)"

cat >"$data_dir/zoo.cfg" <<CFG
# Written by tools/zookeeper/start.sh.
tickTime=2000
dataDir=$data_dir
clientPort=$port
clientPortAddress=$address
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
CFG

# shellcheck disable=SC2086  # ZK_HEAP_OPTS is a word list on purpose
exec "$here/run-jars.sh" .cache/zookeeper/libs tools/zookeeper/fetch.sh \
    ${ZK_HEAP_OPTS:--Xmx128m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlogback.configurationFile="$here/logback.xml" \
    -- org.apache.zookeeper.server.ZooKeeperServerMain "$data_dir/zoo.cfg"
