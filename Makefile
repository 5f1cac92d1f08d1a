# josefk: the two commands of the README are `make serve` and `make test`.
# Everything they need is installed here: a venv in .venv, Apache Kafka's jars
# (for cross-checks) in .cache/, both git-ignored.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: install serve test lint kafka-jars kcat compat compat-kafka bench-log clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## Start one broker on 127.0.0.1:9092 with data in ./josefk-data (ARGS: server.properties, --override K=V).
serve: install
	$(BIN)/josefk serve $(ARGS)

## Apache Kafka's jars from Maven Central into .cache/kafka/libs.
kafka-jars:
	tools/kafka/fetch.sh

## kcat (Debian package) for the compatibility suite.
kcat:
	@command -v kcat >/dev/null || { (apt-get update -qq && apt-get install -y -qq kcat) \
	  || sudo sh -c 'apt-get update -qq && apt-get install -y -qq kcat'; }

## The compatibility suite against josefk, started on a free port.
compat: install kafka-jars kcat
	JOSEFK_REQUIRE_KAFKA=1 JOSEFK_REQUIRE_KCAT=1 $(BIN)/pytest compat_tests $(PYTEST_ARGS)

## The same suite against Apache Kafka 4.x (KRaft, from the Maven Central jars).
compat-kafka: install kafka-jars kcat
	JOSEFK_REQUIRE_KAFKA=1 JOSEFK_REQUIRE_KCAT=1 $(BIN)/pytest compat_tests --kafka $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

## The whole suite: lint, unit tests, Kafka's own tools against our files.
test: install kafka-jars lint
	JOSEFK_REQUIRE_KAFKA=1 $(BIN)/pytest $(PYTEST_ARGS)

## Storage engine throughput against a plain os.write loop (1 GiB).
bench-log: install
	$(BIN)/python bench/log_append.py

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache .hypothesis
