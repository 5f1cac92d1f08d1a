"""Where a follower truncates its log when it starts following a leader (KIP-101,
KIP-279): Kafka's ``AbstractFetcherThread.getOffsetTruncationState``.

The follower asks the leader for the end offset of its own latest epoch
(OffsetForLeaderEpoch), or the leader volunteers a diverging epoch in a Fetch answer
(KIP-320). Never blindly to the high watermark: only when the leader knows no epochs
at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from josefk.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache


@dataclass(frozen=True)
class Truncation:
    """Truncate to ``offset``; when not ``complete``, ask the leader again (the
    follower did not know the epoch the leader answered with)."""

    offset: int
    complete: bool


def truncation_point(leader_epoch: int, leader_end_offset: int, epochs: LeaderEpochCache,
                     log_end_offset: int, high_watermark: int) -> Truncation:
    """The leader's answer (its epoch and that epoch's end offset) against our log."""
    if leader_end_offset == UNDEFINED_OFFSET:
        return Truncation(high_watermark, True)
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    follower_epoch, follower_end = epochs.end_offset_for(leader_epoch, log_end_offset)
    if follower_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    if follower_epoch != leader_epoch:
        # We never had the leader's epoch: cut back to the end of our largest epoch
        # below it, then ask again.
        return Truncation(min(follower_end, log_end_offset), False)
    return Truncation(min(follower_end, leader_end_offset, log_end_offset), True)
