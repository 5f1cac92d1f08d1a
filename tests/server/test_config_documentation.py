"""The documentation of every config key (``server/config/config_keys.json``): each key
of the table has a description written for josefk, the table's update modes agree with
the key definitions, and DescribeConfigs answers each description to a client asking
for documentation (and none to one that does not)."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import trio
from kafka.protocol.admin import DescribeConfigsRequest

from josefk.server.broker import Broker
from josefk.server.config.broker import load_config
from josefk.server.config.keys import BROKER_KEYS, TOPIC_KEYS

TABLE = json.loads(resources.files("josefk.server.config")
                   .joinpath("config_keys.json").read_text())
TOPIC, BROKER = 2, 4
MODES = {"read-only", "per-broker", "cluster-wide"}


def table_keys() -> list[tuple[str, str]]:
    return [(section, name) for section in ("broker", "topic") for name in TABLE[section]]


@pytest.mark.parametrize(("section", "name"), table_keys())
def test_every_key_has_documentation_of_our_own(section: str, name: str) -> None:
    doc = TABLE[section][name]["doc"]
    assert isinstance(doc, str) and doc.strip(), name
    assert not re.search(r"<[a-zA-Z/][^>]*>", doc), f"HTML in {name}: {doc}"
    # Written as sentences: a capital (or a key's name) first, a full stop last.
    first = doc.split()[0]
    assert doc[0].isupper() or first in TABLE["broker"] or first in TABLE["topic"], doc
    assert doc == doc.strip() and doc.endswith("."), doc
    assert len(doc) <= 400, f"{name}: one or two sentences, not {len(doc)} characters"


def test_the_table_agrees_with_the_key_definitions() -> None:
    assert {v["mode"] for v in TABLE["broker"].values()} == MODES
    assert set(TABLE["security"]) <= set(TABLE["broker"])
    for section, keys in (("broker", BROKER_KEYS), ("topic", TOPIC_KEYS)):
        for name, spec in keys.items():
            if name in TABLE[section]:
                entry = TABLE[section][name]
                assert entry["type"] == spec.type.name, name
                assert spec.doc == entry["doc"], name
                if section == "broker":
                    assert spec.dynamic is (entry["mode"] != "read-only"), name
    # Keys josefk adds (ZooKeeper mode, metrics) carry their own documentation.
    assert all(spec.doc for spec in (*BROKER_KEYS.values(), *TOPIC_KEYS.values()))


class Raw:
    """One connection sending kafka-python request objects at a chosen version."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.correlation_id = 0

    async def send(self, version: int, **fields: Any) -> Any:
        self.correlation_id += 1
        request = DescribeConfigsRequest[version](**fields)
        request.with_header(correlation_id=self.correlation_id, client_id="docs-test")
        await self.stream.send_all(request.encode(header=True, framed=True))
        buf = b""
        with trio.fail_after(10):
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                chunk = await self.stream.receive_some(1 << 20)
                assert chunk, "the broker closed the connection"
                buf += chunk
        return request.header.get_response_class().decode(buf[4:], version=version,
                                                          header=True)


@pytest.fixture
async def raw(tmp_path: Path) -> AsyncIterator[Raw]:
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                "log.dirs": str(tmp_path / "data")})
    async with trio.open_nursery() as nursery:
        broker: Broker = await nursery.start(Broker(config).serve)
        await broker.create_topic("docs", 1)
        stream = await trio.open_tcp_stream("127.0.0.1", broker.bound_ports[0])
        async with stream:
            yield Raw(stream)
        nursery.cancel_scope.cancel()


async def described(raw: Raw, resource_type: int, name: str, include: bool
                    ) -> dict[str, str | None]:
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)
    [result] = (await raw.send(3, resources=[resource], include_synonyms=False,
                               include_documentation=include)).results
    assert result.error_code == 0, result
    return {c.name: c.documentation for c in result.configs}


@pytest.mark.parametrize(("resource_type", "name", "keys"), [
    (BROKER, "0", BROKER_KEYS), (TOPIC, "docs", TOPIC_KEYS)])
async def test_describe_configs_answers_each_keys_documentation(
        raw: Raw, resource_type: int, name: str, keys: Any) -> None:
    documented = await described(raw, resource_type, name, True)
    assert set(keys) <= set(documented)
    section = "broker" if resource_type == BROKER else "topic"
    for key in keys:
        assert documented[key] == (TABLE[section][key]["doc"] if key in TABLE[section]
                                   else keys[key].doc), key
    assert all(doc is None for doc in (await described(raw, resource_type, name,
                                                       False)).values())
