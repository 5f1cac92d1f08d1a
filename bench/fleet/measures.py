"""The four figures of one cluster, each a bounded wait on what brokers answer.

Every time is from a moment the bench caused (a signal sent, a spawn, the last CreateTopics
answer) to the first Metadata answer showing the goal; ``resolution_s`` is the gap between
that answer and the one before it, the figure's uncertainty. A wait that runs out raises
:class:`StepTimeout`, recorded as such and never as a figure.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

from bench.fleet.metadata import ISR, LEADER, REPLICAS, TOPIC, Observer, Partition, View
from bench.fleet.nodes import Fleet
from bench.wire import Wire

Expected = dict[str, int]  # topic -> partition count
Test = Callable[[View], bool]
#: Metadata records in one CreateTopics (Kafka 4.x's ``MAX_RECORDS_PER_USER_OP``).
MAX_RECORDS = 10_000
POLL_GAP = 0.1  # between two Metadata requests to one broker: the observer is a broker too
NO_ERROR, REQUEST_TIMED_OUT = 0, 7


class StepTimeout(RuntimeError):
    """A wait ran out; the message says what was still missing."""


class StepFailed(RuntimeError):
    """A broker answered with an error the step cannot go on from."""


# --- what a view must show --------------------------------------------------------------


def ours(view: View, expected: Expected) -> list[Partition]:
    """The view's partitions of ``expected``'s topics, or [] unless all of them are there."""
    got = [p for p in view.partitions if p[TOPIC] in expected]
    return got if len(got) == sum(expected.values()) else []


def led_by(expected: Expected, live: set[int]) -> Test:
    """Every partition listed, each with a leader among ``live``."""
    return lambda v: bool(got := ours(v, expected)) and all(p[LEADER] in live for p in got)


def in_sync(expected: Expected) -> Test:
    return lambda v: bool(got := ours(v, expected)) and all(
        set(p[ISR]) == set(p[REPLICAS]) for p in got)


def leads_none(expected: Expected, broker: int) -> Test:
    return lambda v: bool(got := ours(v, expected)) and all(p[LEADER] != broker for p in got)


def out_of_isr(expected: Expected, broker: int) -> Test:
    return lambda v: bool(got := ours(v, expected)) and all(broker not in p[ISR] for p in got)


def back_in_isr(expected: Expected, broker: int) -> Test:
    return lambda v: bool(got := ours(v, expected)) and all(
        broker in p[ISR] for p in got if broker in p[REPLICAS])


def new_controller(old: int) -> Test:
    return lambda v: v.controller not in (old, -1)


# --- waiting ----------------------------------------------------------------------------


def wait_for(observers: list[Observer], test: Test, began: float, timeout: float,
             what: str) -> dict[str, Any]:
    """Poll every observer until ``test`` holds on each one's answer; seconds from ``began``
    to the last of them, and the resolution."""
    deadline = time.monotonic() + timeout
    waiting = {o.port: (o, began) for o in observers}  # port -> (observer, last miss)
    done_at, resolution, polls = began, 0.0, 0
    while waiting:
        for port, (observer, missed) in list(waiting.items()):
            view = observer.view()
            polls += 1
            if view is not None and test(view):
                done_at = max(done_at, view.at)
                resolution = max(resolution, view.at - missed)
                del waiting[port]
            elif view is not None:
                waiting[port] = (observer, view.at)
        if waiting:
            if time.monotonic() > deadline:
                raise StepTimeout(f"{what}: not seen in {timeout:.0f}s on the brokers on "
                                  f"ports {sorted(waiting)}")
            time.sleep(POLL_GAP)
    return {"s": round(done_at - began, 3), "resolution_s": round(resolution, 3),
            "polls": polls}


def observers(fleet: Fleet, ids: list[int], topics: Expected | None = None
              ) -> list[Observer]:
    """One observer per broker, asking for ``topics`` only (None: all)."""
    names = None if topics is None else sorted(topics)
    return [Observer(fleet.port(i), names) for i in ids]


def close(obs: list[Observer]) -> None:
    for o in obs:
        o.close()


# --- the steps --------------------------------------------------------------------------


def record_batches(topics: Expected, most: int = MAX_RECORDS) -> list[dict[str, int]]:
    """``topics`` in consecutive groups of at most ``most`` records each (a topic's record
    and one per partition); a topic larger than that alone in its group."""
    batches: list[dict[str, int]] = []
    records = 0
    for name, count in topics.items():
        if not batches or records + 1 + count > most:
            batches.append({})
            records = 0
        batches[-1][name] = count
        records += 1 + count
    return batches


def create_topics(fleet: Fleet, topics: Expected, replication: int,
                  timeout: float) -> dict[str, Any]:
    """CreateTopics naming every topic, to the controller (a Kafka 3.9 broker that is
    not answers NOT_CONTROLLER; admin clients ask Metadata for it too), waiting for the
    creation as an admin client does (``timeout_ms``: the step's timeout); then until every
    broker's Metadata lists every partition with a live leader. The topics go in requests
    of at most MAX_RECORDS metadata records (a topic and its partitions), all sent at
    once on one connection: josefk's cluster mode keeps Kafka 4.x's bound on one request
    (Kafka 3.9 in ZooKeeper mode has none)."""
    from kafka.protocol.admin import CreateTopicsRequest

    requests = [CreateTopicsRequest[4](
        timeout_ms=int(timeout * 1000), validate_only=False,
        topics=[CreateTopicsRequest.CreatableTopic(
            version=4, name=name, num_partitions=count, replication_factor=replication,
            assignments=[], configs=[]) for name, count in batch.items()])
        for batch in record_batches(topics)]
    controller = controller_of(fleet, min(fleet.live()))
    wire = Wire(f"127.0.0.1:{fleet.port(controller)}", timeout=timeout + 30,
                client_id="bench-fleet")
    began = time.monotonic()
    try:
        for request in requests:
            wire.send(request, 4)
        results = [t for _ in requests for t in wire.receive().topics]
    except TimeoutError as exc:
        raise StepTimeout(f"CreateTopics not answered in {timeout + 30:.0f}s") from exc
    finally:
        wire.close()
    errors: dict[int, int] = {}
    for result in results:
        errors[result.error_code] = errors.get(result.error_code, 0) + 1
    answered = time.monotonic()
    if set(errors) - {NO_ERROR, REQUEST_TIMED_OUT}:
        raise StepFailed(f"CreateTopics errors (code: topics): {errors}")
    obs = observers(fleet, fleet.live(), topics)
    try:
        seen = wait_for(obs, led_by(topics, set(fleet.live())), answered, timeout,
                        "every partition with a leader")
    finally:
        close(obs)
    return {"answered_s": round(answered - began, 3), "visible_s": seen["s"],
            "resolution_s": seen["resolution_s"], "total_s": round(seen["s"] + answered - began, 3),
            "timed_out_answers": errors.get(REQUEST_TIMED_OUT, 0)}


def settle(fleet: Fleet, topics: Expected, timeout: float) -> float:
    """Seconds until the lowest live broker shows every ISR full (not a figure: a start line)."""
    obs = observers(fleet, fleet.live()[:1], topics)
    try:
        return wait_for(obs, in_sync(topics), time.monotonic(), timeout, "every ISR full")["s"]
    finally:
        close(obs)


def controlled_shutdown(fleet: Fleet, broker: int, observer: int, topics: Expected,
                        timeout: float) -> dict[str, Any]:
    """SIGTERM ``broker``: until its process exits, and until ``observer`` shows it leading
    nothing and in no ISR."""
    obs = observers(fleet, [observer], topics)
    exit_at = fleet.exit_watch(broker)
    began = fleet.signal(broker, signal.SIGTERM)
    try:
        moved = wait_for(obs, leads_none(topics, broker), began, timeout, "leaderships moved")
        exited = exit_at(max(0.0, began + timeout - time.monotonic()))
        if exited is None:
            raise StepTimeout(f"broker {broker} still running {timeout:.0f}s after SIGTERM")
        dropped = wait_for(obs, out_of_isr(topics, broker), began, timeout, "out of every ISR")
    finally:
        close(obs)
        fleet.reap(broker)
    return {"broker": broker, "exit_s": round(exited - began, 3), "moved_s": moved["s"],
            "resolution_s": moved["resolution_s"], "out_of_isr_s": dropped["s"]}


def failover(fleet: Fleet, controller: int, observer: int, topics: Expected,
             timeout: float) -> dict[str, Any]:
    """SIGKILL the controller: until ``observer`` names another controller, and until it
    shows every partition led by a live broker."""
    live = set(fleet.live()) - {controller}
    obs = observers(fleet, [observer], topics)
    began = fleet.signal(controller, signal.SIGKILL)
    try:
        elected = wait_for(obs, new_controller(controller), began, timeout, "a new controller")
        led = wait_for(obs, led_by(topics, live), began, timeout, "every partition led")
        dropped = wait_for(obs, out_of_isr(topics, controller), began, timeout,
                           "out of every ISR")
    finally:
        close(obs)
        fleet.reap(controller)
    return {"broker": controller, "controller_s": elected["s"], "leaders_s": led["s"],
            "resolution_s": led["resolution_s"], "out_of_isr_s": dropped["s"]}


def restart(fleet: Fleet, broker: int, observer: int, topics: Expected,
            timeout: float) -> dict[str, Any]:
    """Spawn ``broker`` again (once ZooKeeper has let its old registration go): until its
    port accepts connections, and until ``observer`` shows it back in every ISR it belongs to."""
    if not fleet.wait_unregistered(broker, timeout):
        raise StepTimeout(f"broker {broker} still registered after {timeout:.0f}s")
    own, obs = observers(fleet, [broker], {}), observers(fleet, [observer], topics)
    began = fleet.spawn(broker)
    try:
        listening = wait_for(own, lambda v: True, began, timeout, "answering Metadata")
        back = wait_for(obs, back_in_isr(topics, broker), began, timeout, "back in every ISR")
    finally:
        close(own + obs)
    return {"broker": broker, "answering_s": listening["s"], "isr_s": back["s"],
            "resolution_s": back["resolution_s"]}


def controller_of(fleet: Fleet, broker: int) -> int:
    observer = Observer(fleet.port(broker), [])
    view = observer.view()
    observer.close()
    if view is None or view.controller < 0:
        raise StepFailed(f"broker {broker} names no controller")
    return view.controller
