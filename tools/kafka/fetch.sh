#!/usr/bin/env bash
# Fetch Apache Kafka's jars (listed in tools/kafka/pom.xml) from Maven Central
# into <repo>/.cache/kafka/libs, for tools/kafka/run-class.sh.
#
# Idempotent: a stamp file .cache/kafka/libs/.stamp-kafka-<version> holding the
# pom's checksum says the jars are there; then nothing is done. Maven's local
# repository is <repo>/.cache/m2, so nothing outside the repository is used.
# Needs mvn (and java) on PATH only when the jars are missing.
# Prints one line saying what it did.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
pom="$here/pom.xml"
libs="$root/.cache/kafka/libs"
m2="$root/.cache/m2"

version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom" | head -n1)"
if [[ -z "$version" ]]; then
    echo "fetch.sh: no <kafka.version> in $pom" >&2
    exit 1
fi
stamp="$libs/.stamp-kafka-$version"
sum="$(sha256sum "$pom" | cut -d' ' -f1)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]]; then
    echo "kafka $version jars already in ${libs#"$root"/} ($(find "$libs" -name '*.jar' | wc -l) jars), nothing to do"
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch.sh: mvn not found on PATH (install maven)" >&2
    exit 1
fi

# Download into a fresh directory beside libs/, then swap it in, so an
# interrupted run never leaves a half-filled libs/ with a stamp.
mkdir -p "$root/.cache/kafka"
tmp="$(mktemp -d "$root/.cache/kafka/libs.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
log="$tmp/.mvn.log"
if ! mvn -q -B -f "$pom" -Dmaven.repo.local="$m2" \
        dependency:copy-dependencies -DoutputDirectory="$tmp" >"$log" 2>&1; then
    cat "$log" >&2
    echo "fetch.sh: mvn dependency:copy-dependencies failed" >&2
    exit 1
fi
rm -f "$log"
printf '%s\n' "$sum" >"$tmp/.stamp-kafka-$version"
rm -rf "$libs"
mv "$tmp" "$libs"
trap - EXIT
echo "fetched kafka $version jars into ${libs#"$root"/}" \
    "($(find "$libs" -name '*.jar' | wc -l) jars, $(du -sh "$libs" | cut -f1)) in $((SECONDS - start))s"
