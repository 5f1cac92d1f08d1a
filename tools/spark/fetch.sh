#!/usr/bin/env bash
# Fetch Spark's Kafka connector (spark-sql-kafka-0-10_2.13, listed in
# tools/spark/pom.xml) and the jars it needs beyond PySpark's own from Maven
# Central into <repo>/.cache/spark/jars, for spark_examples and
# compat_tests/test_spark.py (spark.jars; no network at Spark run time).
#
# Idempotent: a stamp file .cache/spark/jars/.stamp-spark-<version> holding the
# checksum of pom.xml and settings.xml says the jars are there; then nothing is
# done. Maven's local repository is <repo>/.cache/m2, so nothing outside the
# repository is used. Needs mvn (and java) on PATH only when the jars are
# missing. Prints one line saying what it did.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
pom="$here/pom.xml"
settings="$here/settings.xml"
jars="$root/.cache/spark/jars"
m2="$root/.cache/m2"

version="$(sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' "$pom" | head -n1)"
if [[ -z "$version" ]]; then
    echo "fetch.sh: no <spark.version> in $pom" >&2
    exit 1
fi
stamp="$jars/.stamp-spark-$version"
sum="$(cat "$pom" "$settings" | sha256sum | cut -d' ' -f1)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]]; then
    echo "spark $version connector jars already in ${jars#"$root"/} ($(find "$jars" -name '*.jar' | wc -l) jars), nothing to do"
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch.sh: mvn not found on PATH (install maven)" >&2
    exit 1
fi

# Download into a fresh directory beside jars/, then swap it in, so an
# interrupted run never leaves a half-filled jars/ with a stamp.
mkdir -p "$root/.cache/spark"
tmp="$(mktemp -d "$root/.cache/spark/jars.tmp.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
log="$tmp/.mvn.log"
if ! mvn -q -B -s "$settings" -f "$pom" -Dmaven.repo.local="$m2" \
        dependency:copy-dependencies -DoutputDirectory="$tmp" >"$log" 2>&1; then
    cat "$log" >&2
    echo "fetch.sh: mvn dependency:copy-dependencies failed" >&2
    exit 1
fi
rm -f "$log"
printf '%s\n' "$sum" >"$tmp/.stamp-spark-$version"
rm -rf "$jars"
mv "$tmp" "$jars"
trap - EXIT
echo "fetched spark $version connector jars into ${jars#"$root"/}" \
    "($(find "$jars" -name '*.jar' | wc -l) jars, $(du -sh "$jars" | cut -f1)) in $((SECONDS - start))s"
