#!/usr/bin/env bash
# Fetch the jars a pom.xml lists from Maven Central into a directory under
# <repo>/.cache, for tools/zookeeper/fetch.sh and tools/kafka39/fetch.sh:
#
#   tools/zookeeper/fetch-jars.sh NAME POM VERSION_PROPERTY LIBS_DIR
#   e.g. fetch-jars.sh zookeeper tools/zookeeper/pom.xml zookeeper.version .cache/zookeeper/libs
#
# Idempotent: a stamp file LIBS_DIR/.stamp-NAME-<version> holding the pom's
# checksum says the jars are there; then nothing is done. Maven's local
# repository is <repo>/.cache/m2, so nothing outside the repository is used.
# Needs mvn (and java) on PATH only when the jars are missing. The jars are
# downloaded beside LIBS_DIR and swapped in, so an interrupted run never leaves
# a half-filled directory with a stamp. Prints one line saying what it did.
set -euo pipefail

if [[ $# -ne 4 ]]; then
    echo "usage: $0 NAME POM VERSION_PROPERTY LIBS_DIR" >&2
    exit 2
fi
name="$1"
pom="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
property="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
libs="$4"
[[ "$libs" == /* ]] || libs="$root/$libs"
m2="$root/.cache/m2"

version="$(sed -n "s:.*<$property>\(.*\)</$property>.*:\1:p" "$pom" | head -n1)"
if [[ -z "$version" ]]; then
    echo "fetch-jars.sh: no <$property> in $pom" >&2
    exit 1
fi
stamp="$libs/.stamp-$name-$version"
sum="$(sha256sum "$pom" | cut -d' ' -f1)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]]; then
    echo "$name $version jars already in ${libs#"$root"/} ($(find "$libs" -name '*.jar' | wc -l) jars), nothing to do"
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch-jars.sh: mvn not found on PATH (install maven)" >&2
    exit 1
fi

mkdir -p "$(dirname "$libs")"
tmp="$(mktemp -d "$libs.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
log="$tmp/.mvn.log"
if ! mvn -q -B -f "$pom" -Dmaven.repo.local="$m2" \
        dependency:copy-dependencies -DoutputDirectory="$tmp" >"$log" 2>&1; then
    cat "$log" >&2
    echo "fetch-jars.sh: mvn dependency:copy-dependencies for $name failed" >&2
    exit 1
fi
rm -f "$log"
printf '%s\n' "$sum" >"$tmp/.stamp-$name-$version"
rm -rf "$libs"
mv "$tmp" "$libs"
trap - EXIT
echo "fetched $name $version jars into ${libs#"$root"/}" \
    "($(find "$libs" -name '*.jar' | wc -l) jars, $(du -sh "$libs" | cut -f1)) in $((SECONDS - start))s"
