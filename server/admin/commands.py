"""``josefk topics|groups|cluster``: their arguments, in the manner of ``kafka-topics.sh``
and ``kafka-consumer-groups.sh``. Only argparse is imported here (``josefk serve`` reads
``COMMANDS``); ``actions`` runs them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datetime

COMMANDS = {
    "topics": "list, describe, create and delete topics",
    "groups": "list, describe consumer groups; reset their offsets",
    "cluster": "cluster id, brokers, controller, under-replicated and offline partitions",
}


def main(argv: list[str]) -> int:
    """``josefk topics|groups|cluster ...``: ``argv`` starts with the command."""
    args = build_parser().parse_args(argv)
    from josefk.server.admin.actions import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    """The admin commands' full parser (``josefk.server.cli`` lists them by name only,
    so that starting a broker does not build it)."""
    parser = argparse.ArgumentParser(prog="josefk", description="A Kafka broker in Python.")
    commands = parser.add_subparsers(dest="command", required=True)
    _topics(commands.add_parser("topics", help=COMMANDS["topics"]))
    _groups(commands.add_parser("groups", help=COMMANDS["groups"]))
    _common(commands.add_parser("cluster", help=COMMANDS["cluster"]))
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default="localhost:9092", metavar="HOST:PORT",
                        help="a broker to start from (default: localhost:9092)")
    parser.add_argument("--command-config", type=Path, metavar="FILE",
                        help="Kafka client properties: security.protocol, sasl.*, ssl.*")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--timeout", type=_seconds, default=10.0, metavar="SECONDS",
                        help="per request (default 10); waits for brokers take up to 60")


def _topics(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    _common(actions.add_parser("list", help="topic names"))
    describe = actions.add_parser("describe", help="partitions, leaders, replicas, ISR")
    describe.add_argument("topic", nargs="?", help="one topic (default: all)")
    _common(describe)
    create = actions.add_parser("create", help="create a topic; waits until every broker "
                                               "has it")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=-1,
                        help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1,
                        help="default: the broker's default.replication.factor")
    create.add_argument("--config", action="append", default=[], type=_key_value,
                        metavar="KEY=VALUE", help="a topic config (repeatable)")
    _common(create)
    delete = actions.add_parser("delete", help="delete a topic; waits until every broker "
                                               "has dropped it")
    delete.add_argument("topic")
    _common(delete)


def _groups(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    _common(actions.add_parser("list", help="groups with their state"))
    describe = actions.add_parser("describe", help="members and lag per partition")
    describe.add_argument("group")
    _common(describe)
    reset = actions.add_parser("reset-offsets", help="set an inactive group's offsets "
                                                     "(a dry run without --execute)")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", dest="to", action="store_const", const="earliest")
    to.add_argument("--to-latest", dest="to", action="store_const", const="latest")
    to.add_argument("--to-offset", dest="to", type=int, metavar="N")
    to.add_argument("--to-datetime", dest="to", type=_datetime, metavar="ISO",
                    help="e.g. 2026-01-31T12:00:00 (local time) or ...+00:00")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only print them (default)")
    _common(reset)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 86_400:
        raise argparse.ArgumentTypeError(f"expected seconds (a number above 0), not {text!r}")
    return value


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key.strip(), value.strip()


def _datetime(text: str) -> datetime.datetime:
    import datetime

    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO date and time (2026-01-31T12:00:00[+00:00])") from None
