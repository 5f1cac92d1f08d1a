"""kafka-python message classes for KIP-848's ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), which kafka-python 3.0.12 has no schema for.

The JSON specs beside this module are Kafka's (ConsumerGroupDescribe with version 1's
``MemberType``, KIP-1099); kafka-python's ``load_json`` reads them, so these classes
behave like its own: ``ConsumerGroupHeartbeatRequest[1].decode(...)``, nested struct
classes as attributes.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
]


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=__package__):
    """A consumer group member's heartbeat: join (epoch 0), beat, leave (-1, -2)."""


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=__package__):
    """The member's id and epoch, the heartbeat interval, and maybe its assignment."""


class ConsumerGroupDescribeRequest(ApiMessage, load_json=__package__):
    """Describe consumer groups (v0-1)."""


class ConsumerGroupDescribeResponse(ApiMessage, load_json=__package__):
    """Each group: epochs, assignor, members with their current and target assignments."""
