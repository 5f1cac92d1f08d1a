"""What ``josefk topics|groups|cluster`` do: open an admin client, run the operation
(a spinner while it waits), print a table or JSON, or one line of error with exit
status 1."""

from __future__ import annotations

import argparse
import os
import sys

import trio

from josefk.server.admin import render
from josefk.server.admin.client import Admin, open_admin
from josefk.server.admin.errors import AdminError
from josefk.server.admin.properties import load_security
from josefk.server.admin.spinner import spinning
from josefk.server.security.client import PeerSecurity

WAIT_S = 60.0


def run(args: argparse.Namespace) -> int:
    """Run an admin subcommand; 1 with a one-line error on stderr when it fails."""
    try:
        security = load_security(args.command_config)
        text = trio.run(_dispatch, args, security)
    except AdminError as e:
        print(f"josefk {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug or an unforeseen failure: still one line, no traceback
        print(f"josefk {args.command}: unexpected {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if text:
        return _print(text)
    return 0


def _print(text: str) -> int:
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `josefk ... | head`: the reader is gone, not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


async def _dispatch(args: argparse.Namespace, security: PeerSecurity) -> str:
    async with open_admin(args.bootstrap_server, security=security, client_id="josefk-cli",
                          timeout_s=args.timeout) as admin:
        if args.command == "topics":
            return await _run_topics(admin, args)
        if args.command == "groups":
            return await _run_groups(admin, args)
        return await _run_cluster(admin, args)


async def _run_topics(admin: Admin, args: argparse.Namespace) -> str:
    if args.action in ("list", "describe"):
        topics = (await admin.cluster()).topics
        if args.action == "list":
            return (render.as_json([t.name for t in topics]) if args.output == "json"
                    else render.topic_names(topics))
        if args.topic is not None:
            topics = [t for t in topics if t.name == args.topic]
            if not topics:
                raise AdminError("UNKNOWN_TOPIC_OR_PARTITION",
                                 f"topic {args.topic!r} does not exist")
        return (render.as_json([t.as_json() for t in topics]) if args.output == "json"
                else render.topics_table(topics))
    if args.action == "create":
        await admin.create_topic(args.topic, args.partitions, args.replication_factor,
                                 dict(args.config))
        await spinning(f"waiting for every broker to see {args.topic}",
                       lambda: admin.wait_for_topic(args.topic, True, WAIT_S))
        verb = "created"
    else:
        await admin.delete_topic(args.topic)
        await spinning(f"waiting for every broker to drop {args.topic}",
                       lambda: admin.wait_for_topic(args.topic, False, WAIT_S))
        verb = "deleted"
    if args.output == "json":
        return render.as_json({verb: args.topic})
    return f"{verb.capitalize()} topic {render.cell(args.topic)}."


async def _run_groups(admin: Admin, args: argparse.Namespace) -> str:
    json_out = args.output == "json"
    if args.action == "list":
        groups = await admin.list_groups()
        return (render.as_json([g.as_json() for g in groups]) if json_out
                else render.groups_table(groups))
    if args.action == "describe":
        group = await admin.describe_group(args.group)
        return render.as_json(group.as_json()) if json_out else render.group_text(group)
    offsets = await spinning(
        f"resetting the offsets of {args.group}" if args.execute else "computing offsets",
        lambda: admin.reset_offsets(args.group, args.topic, args.to, execute=args.execute))
    if not args.execute:
        print("Dry run: nothing committed; add --execute to commit these offsets.",
              file=sys.stderr)
    return (render.as_json(render.reset_json(args.group, offsets, args.execute)) if json_out
            else render.reset_table(args.group, offsets))


async def _run_cluster(admin: Admin, args: argparse.Namespace) -> str:
    cluster = await admin.cluster()
    return (render.as_json(render.cluster_json(cluster)) if args.output == "json"
            else render.cluster_text(cluster))
