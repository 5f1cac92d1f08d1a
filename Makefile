# josefk: the two commands of the README are `make serve` and `make test`.
# Everything they need is installed here: a venv in .venv, Apache Kafka's jars
# (for cross-checks) in .cache/, both git-ignored.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.core-stamp
DEV := $(VENV)/.dev-stamp
PYTEST_ARGS ?=

.PHONY: install serve test lint kafka-jars spark-jars kcat chromium fuse compat compat-kafka bench-log bench bench-quick clean faketime \
	zookeeper-jars kafka39-jars compat-cluster-kafka cluster kafka-python-tests chaos fuzz

# The broker alone: what `make serve` needs.
$(CORE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# Plus the test tools and the stock clients under test (and PySpark).
$(DEV): $(CORE)
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(DEV)

## Start one broker on 127.0.0.1:9092 with data in ./josefk-data (ARGS: server.properties, --override K=V).
serve: $(CORE)
	$(BIN)/josefk serve $(ARGS)

## ZooKeeper and three brokers (127.0.0.1:9092-9094, data in ./josefk-cluster) in the foreground.
cluster: $(CORE) zookeeper-jars
	$(BIN)/python tools/cluster.py $(ARGS)

## Apache Kafka's jars from Maven Central into .cache/kafka/libs.
kafka-jars:
	tools/kafka/fetch.sh

## Apache ZooKeeper 3.8's server jars from Maven Central into .cache/zookeeper/libs (cluster tests).
zookeeper-jars:
	tools/zookeeper/fetch.sh

## Apache Kafka 3.9's jars from Maven Central into .cache/kafka39/libs: the ZooKeeper-mode
## reference broker of the cluster tests.
kafka39-jars:
	tools/kafka39/fetch.sh

## Spark's Kafka connector and the jars it needs from Maven Central into .cache/spark/jars.
spark-jars:
	tools/spark/fetch.sh

## kcat (Debian package) for the compatibility suite.
kcat:
	@command -v kcat >/dev/null || { (apt-get update -qq && apt-get install -y -qq kcat) \
	  || sudo sh -c 'apt-get update -qq && apt-get install -y -qq kcat'; }

## Chromium and its WebDriver (Debian packages) for the console page's browser test.
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { (apt-get update -qq && apt-get install -y -qq chromium chromium-driver) \
	  || sudo sh -c 'apt-get update -qq && apt-get install -y -qq chromium chromium-driver'; }

## libfuse2 (Debian package) for the disk faults: a FUSE file system that returns EIO on
## demand under a broker's log directory (compat_tests/chaos/disk.py, through fusepy).
fuse:
	@ldconfig -p | grep -q 'libfuse\.so\.2' || \
	  { (apt-get update -qq && apt-get install -y -qq libfuse2) \
	  || sudo sh -c 'apt-get update -qq && apt-get install -y -qq libfuse2'; }

## libfaketime (Debian package) for the clock-jump fault: a broker's wall clock stepped
## (compat_tests/chaos/clock.py; its test is compat_tests/chaos/test_clock.py).
faketime:
	@test -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 || \
	  { (apt-get update -qq && apt-get install -y -qq libfaketime) \
	  || sudo sh -c 'apt-get update -qq && apt-get install -y -qq libfaketime'; }

REQUIRE := JOSEFK_REQUIRE_KAFKA=1 JOSEFK_REQUIRE_KCAT=1 JOSEFK_REQUIRE_SPARK=1

## The compatibility suite (stock clients, Java tools, Spark) against josefk.
compat: install kafka-jars zookeeper-jars kafka39-jars spark-jars kcat fuse
	$(REQUIRE) $(BIN)/pytest compat_tests $(PYTEST_ARGS)

## The same suite against Apache Kafka 4.x (KRaft, from the Maven Central jars); its
## cluster tests (compat_tests/cluster) against three Kafka 3.9.1 brokers in ZooKeeper mode.
compat-kafka: install kafka-jars zookeeper-jars kafka39-jars spark-jars kcat fuse
	$(REQUIRE) $(BIN)/pytest compat_tests --kafka $(PYTEST_ARGS)

## The cluster tests alone against three Apache Kafka 3.9.1 brokers in ZooKeeper mode.
compat-cluster-kafka: install zookeeper-jars kafka39-jars fuse
	$(REQUIRE) $(BIN)/pytest compat_tests/cluster --kafka $(PYTEST_ARGS)

## The cluster tests on mixed clusters of josefk and Apache Kafka 3.9.1 brokers: once with a
## Kafka broker as the first controller, once with a josefk broker.
.PHONY: compat-mixed
compat-mixed: install zookeeper-jars kafka39-jars kafka-jars fuse
	$(REQUIRE) $(BIN)/pytest compat_tests/cluster --mixed kafka $(PYTEST_ARGS)
	$(REQUIRE) $(BIN)/pytest compat_tests/cluster --mixed josefk $(PYTEST_ARGS)

## kafka-python's own integration tests (from its git repository, KAFKA_PYTHON_REPO):
## ElectLeaders and partition reassignments against a three-broker josefk cluster, then its
## SSL and SASL (PLAIN, SCRAM-SHA-256/512) tests, whose fixtures start josefk, ZooKeeper and
## Kafka 3.9's admin tools through tools/kafka_python/kafka-root.
kafka-python-tests: install zookeeper-jars kafka39-jars
	tools/kafka_python_tests.sh
	tools/kafka_python_security_tests.sh

## kafka-python's whole integration suite (KAFKA_VERSION=4.0.0) against one josefk broker
## (DescribeQuorum, KRaft only, and the version inference, which sees 4.3, left out), then,
## for reference, against one Apache Kafka 4.x node, whose failures are printed and not
## fatal (tools/kafka_python_one_broker.sh).
.PHONY: kafka-python-one-broker
kafka-python-one-broker: install kafka-jars
	tools/kafka_python_one_broker.sh $(PYTEST_ARGS)
	-tools/kafka_python_one_broker.sh --kafka $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

## The whole suite: lint, unit and integration tests (TEST_JOBS processes, one test file
## each at a time), then the compatibility suite (kafka-python, aiokafka, confluent-kafka,
## kcat, Kafka's Java tools, Spark) against josefk, one test at a time: its brokers, JVMs
## and Spark jobs take the machine's cores.
TEST_JOBS ?= 2
test: install kafka-jars zookeeper-jars kafka39-jars spark-jars kcat chromium fuse faketime lint
	$(REQUIRE) JOSEFK_REQUIRE_CHROMIUM=1 $(BIN)/pytest tests -n $(TEST_JOBS) --dist loadfile \
	  --durations=20 $(PYTEST_ARGS)
	$(REQUIRE) JOSEFK_REQUIRE_CHROMIUM=1 $(BIN)/pytest compat_tests --durations=40 $(PYTEST_ARGS)

BENCH := $(VENV)/.bench-stamp
$(BENCH): $(CORE)
	$(BIN)/pip install -q -e '.[bench]'
	touch $@

## josefk vs Apache Kafka 4.x, every workload, 5 alternating rounds (~15-20 min); ARGS for options.
bench: $(BENCH) kafka-jars
	$(BIN)/python -m bench.run $(ARGS)

## The same as a ~1-2 min smoke test (checks the plumbing; figures not meaningful).
bench-quick: $(BENCH) kafka-jars
	$(BIN)/python -m bench.run --quick $(ARGS)

## Replication: three josefk brokers vs three Apache Kafka 3.9.1 brokers on one ZooKeeper,
## acks=all, RF 3, 3 alternating rounds of 1 GiB (~2-3 min); ARGS for options (--quick).
.PHONY: bench-cluster
bench-cluster: $(BENCH) zookeeper-jars kafka39-jars
	$(BIN)/python -m bench.cluster $(ARGS)

## Log compaction vs Apache Kafka 4.x: cleaning MB/s and group coordinator start-up after
## 1M offset commits, 3 alternating rounds (~10-15 min); ARGS for options (--quick).
.PHONY: bench-compaction
bench-compaction: $(BENCH) kafka-jars
	$(BIN)/python -m bench.compaction $(ARGS)

## Idle connections vs Apache Kafka 4.x: broker RSS and accept rate for 10,000 idle
## connections, 100 active producers' p50/p99 with and without them, 2 alternating rounds
## (~6-8 min); ARGS for options (--quick).
.PHONY: bench-connections
bench-connections: $(BENCH) kafka-jars
	$(BIN)/python -m bench.connections $(ARGS)

## TLS vs Apache Kafka 4.x: produce (acks=1, idempotent) and consume MiB/s over PLAINTEXT and
## SASL_SSL (SASL/PLAIN) on both brokers, 3 alternating rounds (~10-15 min); ARGS (--quick).
.PHONY: bench-security
bench-security: $(BENCH) kafka-jars
	$(BIN)/python -m bench.security $(ARGS)

## Cold start vs Apache Kafka 4.x: spawn to the first acknowledged produce (acks=all, topic
## created after the port opens), 5 alternating rounds, plus where josefk's time goes
## (interpreter, imports, start-up phases); results in bench/results/startup/ (~3 min);
## ARGS (--rounds N, --before REV: also josefk as of commit REV, in the same rounds).
.PHONY: bench-startup
bench-startup: $(BENCH) kafka-jars
	$(BIN)/python -m bench.startup $(ARGS)

## Time to a usable broker: the kafka_broker fixture (in-process), a josefk process and
## Apache Kafka 4.x started as testcontainers does (format + start), until a first acked
## produce, 5 alternating rounds (~5 min); results in bench/results/fixture/; ARGS (--rounds N).
.PHONY: bench-fixture
bench-fixture: $(BENCH) kafka-jars
	$(BIN)/python -m bench.fixture_startup $(ARGS)

## What /metrics costs: produce and consume MiB/s and broker CPU for josefk without metrics,
## josefk scraped every second, and Apache Kafka 4.x, 3 alternating rounds (~7 min); ARGS (--quick).
.PHONY: bench-metrics
bench-metrics: $(BENCH) kafka-jars
	$(BIN)/python -m bench.metrics $(ARGS)

## Consumer fetch sessions (KIP-227) on and off (max.incremental.fetch.session.cache.slots=0),
## josefk and Apache Kafka 4.x, 1,000 partitions, the Java consumer: broker CPU per fetch,
## bytes per request, MB/s (~5 min); results in bench/results/fetch_sessions/; ARGS (--quick).
.PHONY: bench-fetch-sessions
bench-fetch-sessions: $(BENCH) kafka-jars
	$(BIN)/python -m bench.fetch_sessions $(ARGS)

## Client quotas held over 100 s: a kafka-python producer and consumer against their
## producer_byte_rate / consumer_byte_rate on josefk, then on Apache Kafka 4.x (~6 min);
## prints measured/quota for each (compat_tests/test_quotas.py, JOSEFK_QUOTA_RUN_S=100).
.PHONY: bench-quotas
bench-quotas: install kafka-jars
	JOSEFK_QUOTA_RUN_S=100 $(BIN)/pytest -s -p no:cacheprovider compat_tests/test_quotas.py -k held \
		$(PYTEST_ARGS)
	JOSEFK_QUOTA_RUN_S=100 $(BIN)/pytest -s -p no:cacheprovider compat_tests/test_quotas.py -k held \
		--kafka $(PYTEST_ARGS)

SCALE ?= 1

## Cost at scale vs Apache Kafka 4.x: 10 to 50,000 partitions (create, metadata, produce,
## fetch, RSS, fds, restarts) and start-up on a 20 GiB log, both times SCALE (SCALE=1 is the
## full run, hours; needs ~25 GiB free); ARGS for options (--quick, --brokers, --partitions).
.PHONY: bench-scale
bench-scale: $(BENCH) kafka-jars
	$(BIN)/python -m bench.scale --scale $(SCALE) $(ARGS)

## The same partition figures for three brokers, replication factor 3, acks=all, against
## three Apache Kafka 3.9.1 brokers in ZooKeeper mode (10, 1,000, 10,000 partitions x SCALE).
.PHONY: bench-scale-cluster
bench-scale-cluster: $(BENCH) zookeeper-jars kafka39-jars
	$(BIN)/python -m bench.scale --cluster --scale $(SCALE) $(ARGS)

BROKERS ?=
PARTITIONS ?=
TARGETS ?= josefk,kafka

## The cluster at scale (issue 31): BROKERS brokers (default 5,10) x PARTITIONS partitions
## (default 10000,100000; RF 3) of each of TARGETS (josefk, Apache Kafka 3.9.1 in ZooKeeper
## mode): topic creation visible on every broker, controlled shutdown, controller failover,
## restart back into every ISR; results in bench/results/fleet/. ARGS for options
## (--smoke: 3 brokers, 300 partitions, results in bench/results/fleet/smoke/;
## --data-dir /dev/shm: data on tmpfs, as the README's figures).
.PHONY: bench-fleet
bench-fleet: $(BENCH) zookeeper-jars kafka39-jars
	$(BIN)/python -m bench.fleet $(if $(BROKERS),--brokers $(BROKERS)) \
		$(if $(PARTITIONS),--partitions $(PARTITIONS)) --targets $(TARGETS) $(ARGS)

## Storage engine throughput against a plain os.write loop (1 GiB).
bench-log: install
	$(BIN)/python bench/log_append.py

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache .hypothesis

DURATION ?= 300
SEED ?=
FAULTS ?= kill,kill-controller,kill-leader,pause,partition
TARGET ?= josefk
WORKLOAD ?= queue
ZOOKEEPERS ?= 1

## Jepsen-style fault injection: ZooKeeper and three brokers (josefk, or TARGET=kafka for
## Apache Kafka 3.9.1) in network namespaces, a workload (WORKLOAD=queue: idempotent
## producers and consumers; WORKLOAD=txn: transactional producers, read_committed reads and
## an exactly-once transformer), a nemesis (FAULTS) for DURATION seconds, then the checker;
## WORKLOAD=groups: members joining, leaving, killed; WORKLOAD=compact: keys overwritten
## and deleted in a compacted topic. ZOOKEEPERS=3 runs a ZooKeeper ensemble (FAULTS=
## zk-node-kill kills one member at a time); FAULTS=clock-jump steps a broker's wall clock;
## history, report and timeline.png in chaos-runs/. The last line counts the anomalies.
chaos: install fuse faketime zookeeper-jars $(if $(filter kafka,$(TARGET)),kafka39-jars)
	$(BIN)/python -m compat_tests.chaos --target $(TARGET) --duration $(DURATION) \
	  --workload $(WORKLOAD) --faults $(FAULTS) --zookeepers $(ZOOKEEPERS) $(if $(SEED),--seed $(SEED))

## Issue 32's acceptance runs: one WORKLOAD (txn, groups) against TARGET with every fault
## (FAULTS=all: a ZooKeeper ensemble, clock jumps, disk faults), one DURATION-second run per
## seed of SEEDS; each run's last line (its output in chaos-runs/), the worst status.
SEEDS ?= 1 2 3 4 5
.PHONY: chaos-seeds
chaos-seeds: install fuse faketime zookeeper-jars $(if $(filter kafka,$(TARGET)),kafka39-jars)
	@mkdir -p chaos-runs; status=0; for seed in $(SEEDS); do \
	  out=chaos-runs/$(TARGET)-$(WORKLOAD)-seed$$seed.txt; \
	  $(BIN)/python -m compat_tests.chaos --target $(TARGET) --duration $(DURATION) \
	    --workload $(WORKLOAD) --faults all --zookeepers 3 --seed $$seed > $$out 2>&1; \
	  rc=$$?; tail -1 $$out; [ $$rc -gt $$status ] && status=$$rc; \
	done; exit $$status

## The soak: every workload at once (queue, transactions, groups, compaction) on three
## brokers for DURATION seconds (default 3600 here), one fault every few minutes (SOAK_FAULTS),
## each broker's RSS, descriptors and ApiVersions round trip sampled; then every checker,
## the slopes and the worst stall, and soak.png, in chaos-runs/soak-*. TARGET=kafka as above.
SOAK_FAULTS ?= kill,kill-controller,kill-leader,pause,partition,zk-kill,zk-expire
.PHONY: soak
soak: install fuse zookeeper-jars $(if $(filter kafka,$(TARGET)),kafka39-jars)
	$(BIN)/python -m compat_tests.chaos.soak --target $(TARGET) \
	  --duration $(if $(filter command line environment,$(origin DURATION)),$(DURATION),3600) \
	  --faults $(SOAK_FAULTS) --zookeepers $(ZOOKEEPERS) $(if $(SEED),--seed $(SEED))

SECONDS ?= 600

## Coverage-guided fuzzing (atheris, hypothesis): the request decoders and the SASL server,
## then a broker per listener kind (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) fed mutated
## requests before and after authentication, SECONDS each. Prints inputs tried, distinct
## crashes (inputs kept in fuzz-crashes/) and the broker's RSS growth; fails on any crash.
fuzz: install
	$(BIN)/python -m fuzz --seconds $(SECONDS) $(ARGS)
