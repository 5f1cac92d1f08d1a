#!/usr/bin/env bash
# kafka-python's tests, from its git repository, for tools/kafka_python_tests.sh and
# tools/kafka_python_security_tests.sh: prints the directory of the checkout.
#
#   tools/kafka_python/checkout.sh
#
# The repository is KAFKA_PYTHON_REPO (default https://github.com/dpkp/kafka-python.git; a
# local clone or mirror works too, e.g. KAFKA_PYTHON_REPO=/work/.mirror/dpkp+kafka-python/repo).
# The ref is KAFKA_PYTHON_REF if set, else the tag named as the installed kafka-python's
# version, else the newest release tag before that version (kafka-python 3.0.12 installed
# and a repository whose tags stop at 3.0.11: 3.0.11). The ref used is printed on stderr and
# kept in .kafka-python-ref. Only test/ and servers/resources/ (the broker config templates
# the fixtures render) are checked out, with the top-level files: kafka/ stays out, or it
# would shadow the installed client, which is what the tests must exercise. The checkout is
# cached in .cache/kafka-python-tests/<installed version>; delete it to fetch again.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="$root/.venv/bin/python"
version="$("$py" -c 'import kafka; print(kafka.__version__)')"
cache="$root/.cache/kafka-python-tests/$version"

if [[ ! -d "$cache/test/integration" || ! -d "$cache/servers/resources" ||
      ! -f "$cache/.kafka-python-ref" ]]; then
    rm -rf "$cache"
    mkdir -p "$(dirname "$cache")"
    git clone --quiet --filter=blob:none --no-checkout \
        "${KAFKA_PYTHON_REPO:-https://github.com/dpkp/kafka-python.git}" "$cache" 2>&1 |
        grep -v -e '--filter is ignored in local clones' >&2 || true
    [[ -d "$cache/.git" ]] || { echo "checkout.sh: git clone failed" >&2; exit 1; }
    ref="${KAFKA_PYTHON_REF:-}"
    if [[ -z "$ref" ]]; then
        if git -C "$cache" rev-parse --quiet --verify "refs/tags/$version" >/dev/null; then
            ref="$version"
        else
            ref="$( { git -C "$cache" tag --list | grep -E '^[0-9]+(\.[0-9]+)+$'; \
                      echo "$version"; } | sort -V -u |
                    awk -v v="$version" '$0 == v { print prev; exit } { prev = $0 }')"
            [[ -n "$ref" ]] || { echo "checkout.sh: no tag up to $version" >&2; exit 1; }
        fi
    fi
    git -C "$cache" sparse-checkout set test servers/resources
    git -C "$cache" checkout --quiet "$ref"
    echo "$ref" >"$cache/.kafka-python-ref"
fi
echo "kafka-python tests from ref $(cat "$cache/.kafka-python-ref")" \
    "(kafka-python $version installed)" >&2
echo "$cache"
