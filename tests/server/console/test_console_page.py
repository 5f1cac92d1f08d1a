"""The console page in a real headless Chromium (Debian's chromium and chromium-driver,
driven by selenium) against three josefk brokers on a real ZooKeeper (``kafka_cluster``).

What the page renders is compared with what stock clients see and did: the ISR of each
partition as kafka-python's admin client describes it, the lag of a group that committed
offsets behind the log end with kafka-python, a follower paused with SIGSTOP marking its
partitions under-replicated (and only those), unmarked once it resumes. A hostile client
id and group id must come out as text, not markup.

``JOSEFK_CONSOLE_SCREENSHOT=path`` keeps a screenshot (taken while the follower is paused).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.timeout(420)

T = TypeVar("T")

TOPICS = ("orders", "audit")
LAGGING_GROUP = "billing"
PER_PARTITION, COMMITTED = 10, 4
HOSTILE_CLIENT = '<img src=x onerror="document.title=\'owned\'">'
HOSTILE_GROUP = '</td><script>document.title="owned"</script>'

# Each rendered partition row: its topic, partition, replicas, ISR and highlight.
ROWS_JS = """
return [...document.querySelectorAll('#partitions tbody tr')].map(tr => ({
  topic: tr.dataset.topic, partition: Number(tr.dataset.partition),
  replicas: [...tr.querySelectorAll('.rep')].map(x => Number(x.textContent)),
  isr: tr.querySelector('.isr').textContent,
  marked: tr.classList.contains('urp') || tr.classList.contains('offline'),
  state: tr.querySelector('.state').textContent}));
"""
# One group's card: the lag rows and total, its members' client ids, markup inside it.
GROUP_JS = """
const card = [...document.querySelectorAll('#groups .group')]
  .find(g => g.dataset.group === arguments[0]);
if (!card) return null;
return {
  offsets: [...card.querySelectorAll('table.offsets tbody tr')].map(tr =>
    [...tr.cells].slice(0, 5).map(td => td.textContent)),
  total: card.querySelector('.lag-total b').textContent,
  name: card.querySelector('.group-id').textContent,
  clients: [...card.querySelectorAll('.members .client')].map(x => x.textContent),
  elements: card.querySelectorAll('img, script').length};
"""


def wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """``check()`` until it returns something truthy; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")


# Session scope: set up before the cluster's session-scoped ZooKeeper, so a machine
# without Chromium skips before starting anything.
@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium through chromedriver; skipped without them, failed without them
    under JOSEFK_REQUIRE_CHROMIUM=1 (make test installs them: make chromium)."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", chromedriver))
               if path is None]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package (pip install -e '.[test]')")
    if missing:
        message = f"no {', '.join(missing)}: run make chromium"
        if os.environ.get("JOSEFK_REQUIRE_CHROMIUM") == "1":
            pytest.fail(message + " (JOSEFK_REQUIRE_CHROMIUM=1)", pytrace=False)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1440,1040", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    # An explicit driver: selenium must not try to download one.
    driver = webdriver.Chrome(options=options, service=Service(chromedriver))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def kafka_cluster_config() -> dict[str, str]:
    # A paused follower leaves the ISR within seconds (and its session expires: 6 s).
    return {"replica.lag.time.max.ms": "3000", "offsets.topic.replication.factor": "3"}


def prepare(bootstrap: str, page_broker: int, other: int) -> None:
    """Topics with records and a group that committed COMMITTED of PER_PARTITION."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([
            NewTopic("orders", 3, 3),
            # Placed away from the broker the test pauses: it must stay unmarked.
            NewTopic("audit", replica_assignments={0: [page_broker, other]}),
        ])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    for partition in range(3):
        for _ in range(PER_PARTITION):
            producer.send("orders", b"x" * 100, partition=partition).get(timeout=30)
    producer.send("audit", b"a").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=LAGGING_GROUP,
                             enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition("orders", p): OffsetAndMetadata(COMMITTED, "", -1)
                         for p in range(3)})
    finally:
        consumer.close()


def described_isr(bootstrap: str) -> dict[tuple[str, int], list[int]]:
    """Each partition's ISR as kafka-python's admin client describes it."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        topics = admin.describe_topics(["orders", "audit"])
    finally:
        admin.close()
    return {(t["name"], p["partition_index"]): sorted(p["isr_nodes"])
            for t in topics for p in t["partitions"]}


@pytest.fixture(scope="module")
def roles(kafka_cluster: Any) -> tuple[int, int, int]:
    """(the controller, whose page the test loads; the broker it pauses; the third), once
    TOPICS hold records and LAGGING_GROUP has committed."""
    controller = kafka_cluster.controller_id()
    paused, other = sorted(i for i in kafka_cluster.brokers if i != controller)
    prepare(kafka_cluster.bootstrap, controller, other)
    return controller, paused, other


@pytest.fixture(scope="module")
def hostile_member(kafka_cluster: Any, roles: tuple[int, int, int]
                   ) -> Iterator[KafkaConsumer]:
    """A live member of a group, both named with markup."""
    consumer = KafkaConsumer("orders", bootstrap_servers=kafka_cluster.bootstrap,
                             group_id=HOSTILE_GROUP, client_id=HOSTILE_CLIENT)
    try:
        wait_for(lambda: consumer.poll(500) is not None and consumer.assignment(), 60,
                 "the hostile consumer's assignment")
        yield consumer
    finally:
        consumer.close()


def rows(driver: Any) -> dict[tuple[str, int], dict[str, Any]]:
    """The rendered rows of TOPICS' partitions, by (topic, partition)."""
    return {(r["topic"], r["partition"]): r for r in driver.execute_script(ROWS_JS)
            if r["topic"] in TOPICS}


def with_traffic(bootstrap: str, seconds: float, then: Callable[[], object]) -> None:
    """Records in and out for a few seconds (a consumer group falling behind a producer),
    then ``then()`` while the consumer is still a member: a screenshot with something on
    its throughput chart and in its groups."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20)
    consumer = KafkaConsumer("orders", bootstrap_servers=bootstrap, group_id="analytics",
                             client_id="analytics-worker", auto_offset_reset="earliest",
                             max_poll_records=40)
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for _ in range(50):
                producer.send("orders", os.urandom(1000))
            consumer.poll(100)
            time.sleep(0.05 * ((time.monotonic() * 2) % 3))
        then()
    finally:
        producer.close(timeout=10)
        consumer.close(autocommit=False)


def test_console_page(browser: Any, kafka_cluster: Any, roles: tuple[int, int, int],
                      hostile_member: KafkaConsumer) -> None:
    controller, paused, _ = roles
    page_broker = kafka_cluster.brokers[controller]
    isr = described_isr(kafka_cluster.bootstrap)

    browser.get(page_broker.metrics_url + "/")
    shown = wait_for(lambda: (page := rows(browser)).keys() == isr.keys() and page, 60,
                     f"every partition of {TOPICS} on the page")
    for key, row in shown.items():
        assert sorted(map(int, row["isr"].split(","))) == isr[key], key
        assert not row["marked"] and row["state"] == "ok", row

    group = wait_for(lambda: browser.execute_script(GROUP_JS, LAGGING_GROUP), 30,
                     "the lagging group on the page")
    assert sorted(group["offsets"]) == [
        ["orders", str(p), str(COMMITTED), str(PER_PARTITION), str(PER_PARTITION - COMMITTED)]
        for p in range(3)]
    assert group["total"] == str(3 * (PER_PARTITION - COMMITTED))

    hostile = wait_for(lambda: browser.execute_script(GROUP_JS, HOSTILE_GROUP), 30,
                       "the hostile group on the page")
    assert hostile["name"] == HOSTILE_GROUP
    assert hostile["clients"] == [HOSTILE_CLIENT]
    assert hostile["elements"] == 0
    assert browser.title == "josefk console"
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe

    kafka_cluster.brokers[paused].pause()
    try:
        def marked() -> dict[tuple[str, int], dict[str, Any]] | None:
            page = rows(browser)
            hit = [r for r in page.values() if paused in r["replicas"]]
            return page if page.keys() == isr.keys() and all(r["marked"] for r in hit) else None

        page = wait_for(marked, 90, f"broker {paused}'s partitions marked under-replicated")
        for row in page.values():
            assert row["marked"] == (paused in row["replicas"]), row
            if row["marked"]:
                assert str(paused) not in row["isr"].split(","), row
        if path := os.environ.get("JOSEFK_CONSOLE_SCREENSHOT"):
            running = ",".join(b.bootstrap for i, b in kafka_cluster.brokers.items()
                               if i != paused)
            with_traffic(running, 16, lambda: browser.save_screenshot(path))
    finally:
        kafka_cluster.brokers[paused].resume()

    wait_for(lambda: all(not r["marked"] and len(r["isr"].split(",")) == len(r["replicas"])
                         for r in rows(browser).values()),
             120, f"broker {paused}'s partitions back in sync on the page")
