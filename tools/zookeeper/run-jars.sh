#!/usr/bin/env bash
# Run a Java main class with every jar of one directory on the classpath; the
# shared runner of tools/zookeeper/start.sh and tools/kafka39/run-class.sh:
#
#   tools/zookeeper/run-jars.sh LIBS_DIR FETCH_SCRIPT [JVM_OPTION ...] -- CLASS [ARGS ...]
#
# LIBS_DIR is relative to the repository root (or absolute); FETCH_SCRIPT is
# what to run when it holds no jar (named in the error). Java is
# $JAVA_HOME/bin/java when that exists, else java on PATH. The script execs the
# JVM, so the caller's pid is the JVM's and the exit status is the class's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ $# -lt 4 ]]; then
    echo "usage: $0 LIBS_DIR FETCH_SCRIPT [JVM_OPTION ...] -- CLASS [ARGS ...]" >&2
    exit 2
fi
libs="$1"
[[ "$libs" == /* ]] || libs="$root/$libs"
fetch="$2"
shift 2
jvm=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
    jvm+=("$1")
    shift
done
if [[ $# -lt 2 ]]; then
    echo "run-jars.sh: no CLASS after --" >&2
    exit 2
fi
shift
if ! compgen -G "$libs/*.jar" >/dev/null; then
    echo "run-jars.sh: no jars in $libs; run $fetch first" >&2
    exit 1
fi

java="java"
if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
    java="$JAVA_HOME/bin/java"
fi
exec "$java" "${jvm[@]}" -Djava.awt.headless=true -cp "$libs/*" "$@"
