"""An admin client of a Kafka cluster (josefk or Apache Kafka) over the Kafka protocol,
and the ``josefk topics|groups|cluster`` commands built on it.

- ``client``: ``open_admin(bootstrap)`` and ``Admin``: cluster, topics, groups.
- ``brokers``: one connection per broker, bootstrap and Metadata, errors and retries.
- ``groups``, ``offsets``: consumer groups (describe, lag, reset) and ListOffsets.
- ``views``: the frozen dataclasses answers come as; ``errors``: ``AdminError``.
- ``commands``, ``actions``, ``render``, ``properties``, ``spinner``: the command line:
  its arguments, what each command does, tables and JSON, Kafka client
  ``--command-config`` files, a spinner.

The names below load on first use, so that ``josefk.server.cli`` can register the
commands without importing trio or kafka-python (``josefk serve`` starts fast).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from josefk.server.admin.client import Admin, open_admin
    from josefk.server.admin.errors import AdminError
    from josefk.server.admin.views import (
        BrokerView,
        ClusterView,
        GroupListing,
        GroupView,
        MemberView,
        PartitionLag,
        PartitionView,
        TopicView,
    )

_HOMES = {"Admin": "client", "open_admin": "client", "AdminError": "errors",
          **{name: "views" for name in ("BrokerView", "ClusterView", "GroupListing",
                                        "GroupView", "MemberView", "PartitionLag",
                                        "PartitionView", "TopicView")}}

__all__ = ["Admin", "AdminError", "BrokerView", "ClusterView", "GroupListing", "GroupView",
           "MemberView", "PartitionLag", "PartitionView", "TopicView", "open_admin"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
