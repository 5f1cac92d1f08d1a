"""Regular-expression subscriptions (``subscribed_topic_regex``).

Kafka compiles them with RE2/J and subscribes a member to every topic an expression
matches whole. Google's RE2 (``google-re2``) does the same here: the same syntax (it
refuses backreferences, lookaround, possessive quantifiers...) and matching in linear
time, so no client's expression can stall the broker.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import re2

INTERNAL_TOPICS = frozenset(("__consumer_offsets", "__transaction_state",
                             "__share_group_state"))
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused expression is answered, not logged by RE2


class InvalidRegex(ValueError):
    """An expression RE2 does not compile."""


@functools.lru_cache(maxsize=256)
def compile_re2(expression: str) -> Any:
    """``expression`` compiled by RE2, or InvalidRegex."""
    try:
        return re2.compile(expression, _OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode(errors="replace") if e.args and \
            isinstance(e.args[0], bytes) else str(e)
        # RE2 says "what: where"; Kafka's message has the what.
        raise InvalidRegex(f"SubscribedTopicRegex `{expression}` is not a valid regular "
                           f"expression: {reason.split(': ')[0]}.") from e


def matching_topics(expression: str, names: Iterable[str]) -> set[str]:
    """The topics among ``names`` (internal ones excepted) the expression matches whole."""
    try:
        pattern = compile_re2(expression)
    except InvalidRegex:
        return set()
    return {n for n in names if n not in INTERNAL_TOPICS and pattern.fullmatch(n) is not None}
