#!/usr/bin/env bash
# Start a standalone Apache ZooKeeper server (jars from tools/zookeeper/fetch.sh)
# in the foreground:
#
#   tools/zookeeper/start.sh PORT DATA_DIR [ADDRESS [MYID SERVERS]]
#
# It listens on ADDRESS:PORT (default 127.0.0.1) and keeps its snapshots and transaction log in
# DATA_DIR (created if missing; running again on the same DATA_DIR restarts
# the same server with its data). With MYID and SERVERS it is member MYID of an
# ensemble: SERVERS lists every member as HOST:QUORUM_PORT:ELECTION_PORT, comma-separated,
# member 1 first (e.g. 10.0.0.1:2888:3888,10.0.0.2:2888:3888,10.0.0.3:2888:3888); the
# server then waits for a quorum before it serves. The configuration is written to
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
if [[ $# -lt 2 || $# -gt 5 || $# -eq 4 ]]; then
    echo "usage: $0 PORT DATA_DIR [ADDRESS [MYID SERVERS]]" >&2
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

main=org.apache.zookeeper.server.ZooKeeperServerMain
if [[ $# -eq 5 ]]; then
    # An ensemble member: its id in DATA_DIR/myid, every member in the configuration.
    echo "$4" >"$data_dir/myid"
    {
        echo "initLimit=10"
        echo "syncLimit=5"
        id=1
        IFS=',' read -ra members <<<"$5"
        for member in "${members[@]}"; do
            echo "server.$id=$member"
            id=$((id + 1))
        done
    } >>"$data_dir/zoo.cfg"
    main=org.apache.zookeeper.server.quorum.QuorumPeerMain
fi

# shellcheck disable=SC2086  # ZK_HEAP_OPTS is a word list on purpose
exec "$here/run-jars.sh" .cache/zookeeper/libs tools/zookeeper/fetch.sh \
    ${ZK_HEAP_OPTS:--Xmx128m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlogback.configurationFile="$here/logback.xml" \
    -- "$main" "$data_dir/zoo.cfg"
