"""Putting a throttle time into a response, whatever form its handler gave it.

Handlers answer with the response's fields (a mapping or kafka-python message), or
with frame parts they encoded themselves (Produce, Fetch, Metadata): those get their
``throttle_time_ms`` written in place, where Kafka's schema puts it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

PRODUCE, FETCH, METADATA = 0, 1, 3
# The first version of each hand-encoded response with a flexible (v1) response header.
_FLEXIBLE = {PRODUCE: 9, FETCH: 12, METADATA: 9}
# The first version whose throttle_time_ms is the body's first field.
_LEADING = {FETCH: 1, METADATA: 3}
_I32 = struct.Struct(">i")


def part_length(part: Any) -> int:
    """The byte length of one frame part (bytes, or a file region)."""
    return part.length if hasattr(part, "length") else len(part)


def with_throttle(api_key: int, version: int, result: Any, throttle_ms: int) -> Any:
    """``result`` carrying ``throttle_ms`` as its throttle_time_ms, where it has one."""
    if isinstance(result, dict):
        if "throttle_time_ms" in result:
            result["throttle_time_ms"] = throttle_ms
        return result
    if isinstance(result, list):
        return _patch_frame(api_key, version, result, throttle_ms)
    if result is not None and hasattr(result, "throttle_time_ms"):
        result.throttle_time_ms = throttle_ms
    return result


def _patch_frame(api_key: int, version: int, parts: list[Any], throttle_ms: int
                 ) -> list[Any]:
    flexible = api_key in _FLEXIBLE and version >= _FLEXIBLE[api_key]
    if api_key == PRODUCE and parts and isinstance(parts[-1], bytes | bytearray):
        # Produce v1+: the last field, before the body's tagged fields when flexible.
        last = bytearray(parts[-1])
        end = len(last) - (1 if flexible else 0)
        last[end - 4:end] = _I32.pack(throttle_ms)
        return [*parts[:-1], bytes(last)]
    if api_key in _LEADING and version >= _LEADING[api_key]:
        # Size, correlation id, the header's tagged fields when flexible, then the field.
        return _patch_at(parts, 8 + (1 if flexible else 0), throttle_ms)
    return parts


def _patch_at(parts: Sequence[Any], offset: int, value: int) -> list[Any]:
    """``parts`` with the int32 at frame ``offset`` replaced (in the leading bytes)."""
    head = bytearray()
    taken = 0
    while taken < len(parts) and len(head) < offset + 4 and isinstance(parts[taken], bytes
                                                                       | bytearray):
        head += parts[taken]
        taken += 1
    if len(head) < offset + 4:
        return list(parts)
    head[offset:offset + 4] = _I32.pack(value)
    return [bytes(head), *parts[taken:]]
