"""The command line's output: aligned tables in the columns Kafka's tools print, or
JSON. Unknown values print as ``-``, as ``kafka-consumer-groups.sh`` prints them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from josefk.server.admin.views import ClusterView, GroupListing, GroupView, PartitionLag, TopicView

Row = Sequence[object]


def as_json(value: Any) -> str:
    """Indented JSON of plain values."""
    return json.dumps(value, indent=2)


def table(headers: Row, rows: Sequence[Row]) -> str:
    """Left-aligned columns two spaces apart; control characters in cells escaped, so
    a client id or topic name cannot move the terminal's cursor."""
    cells = [[cell(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in cells)


def cell(value: object) -> str:
    """A value as a table prints it."""
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    text = str(value)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def topic_names(topics: Sequence[TopicView]) -> str:
    return "\n".join(cell(t.name) for t in topics)


def topics_table(topics: Sequence[TopicView]) -> str:
    """One row per partition, as ``kafka-topics.sh --describe`` lists them."""
    rows = [(t.name, p.partition, p.leader, p.replicas, p.isr, _status(p))
            for t in topics for p in t.partitions]
    return table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "STATUS"), rows)


def _status(partition: Any) -> str:
    if partition.offline:
        return "offline"
    return "under-replicated" if partition.under_replicated else "ok"


def groups_table(groups: Sequence[GroupListing]) -> str:
    return table(("GROUP", "STATE", "PROTOCOL-TYPE"),
                 [(g.group_id, g.state, g.protocol_type or None) for g in groups])


def group_text(group: GroupView) -> str:
    """A summary line, then one row per partition with its member, like
    ``kafka-consumer-groups.sh --describe``."""
    members = {m.member_id: m for m in group.members}
    head = (f"Group {cell(group.group_id)}: {group.state}, protocol "
            f"{cell(group.protocol or None)}, coordinator {group.coordinator}, "
            f"{len(group.members)} member(s)")
    rows = []
    for o in group.offsets:
        member = members.get(o.member_id or "")
        rows.append((group.group_id, o.topic, o.partition, o.committed, o.log_end, o.lag,
                     o.member_id, member and member.host, member and member.client_id))
    for m in group.members:
        if not m.assignment:
            rows.append((group.group_id, None, None, None, None, None, m.member_id, m.host,
                         m.client_id))
    headers = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
               "CONSUMER-ID", "HOST", "CLIENT-ID")
    return head + "\n\n" + table(headers, rows)


def reset_table(group_id: str, offsets: Sequence[PartitionLag]) -> str:
    """The new offsets, as ``kafka-consumer-groups.sh --reset-offsets`` prints them."""
    return table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                 [(group_id, o.topic, o.partition, o.committed) for o in offsets])


def reset_json(group_id: str, offsets: Sequence[PartitionLag], executed: bool) -> Any:
    return {"group_id": group_id, "executed": executed,
            "offsets": [{"topic": o.topic, "partition": o.partition, "new_offset": o.committed,
                         "log_end": o.log_end} for o in offsets]}


def cluster_json(cluster: ClusterView) -> Any:
    """The cluster id, controller, brokers and the partitions that need attention."""
    return {"cluster_id": cluster.cluster_id, "controller_id": cluster.controller_id,
            "brokers": [b.as_json() for b in cluster.brokers],
            "topics": len(cluster.topics),
            "partitions": sum(len(t.partitions) for t in cluster.topics),
            "under_replicated": _problems(cluster, "under_replicated"),
            "offline": _problems(cluster, "offline")}


def _problems(cluster: ClusterView, kind: str) -> list[dict[str, Any]]:
    return [{"topic": t.name, **p.as_json()} for t in cluster.topics for p in t.partitions
            if getattr(p, kind)]


def cluster_text(cluster: ClusterView) -> str:
    summary = cluster_json(cluster)
    brokers = table(("BROKER", "HOST", "PORT", "RACK", "ROLE"),
                    [(b.id, b.host, b.port, b.rack,
                      "controller" if b.id == cluster.controller_id else "")
                     for b in cluster.brokers])
    lines = [f"Cluster id: {cell(cluster.cluster_id)}",
             f"Controller: {cluster.controller_id if cluster.controller_id >= 0 else '-'}",
             f"Topics: {summary['topics']}, partitions: {summary['partitions']}",
             "", brokers, "",
             f"Under-replicated partitions: {len(summary['under_replicated'])}",
             f"Offline partitions: {len(summary['offline'])}"]
    bad = summary["under_replicated"] + [p for p in summary["offline"]
                                         if p not in summary["under_replicated"]]
    if bad:
        lines += ["", table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"),
                            [(p["topic"], p["partition"], p["leader"], p["replicas"], p["isr"])
                             for p in bad])]
    return "\n".join(lines)
