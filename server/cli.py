"""The ``josefk`` command line."""

from __future__ import annotations

import argparse
import logging
import resource
import signal
import sys
from pathlib import Path


class _Version(argparse.Action):
    """``--version``, looked up only when asked: importlib.metadata (with email, zipfile,
    csv) is ~13 ms of a broker's 0.2 s start."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 help: str | None = None) -> None:  # noqa: A002 - argparse's keyword
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from importlib.metadata import version

        print(f"josefk {version('josefk')}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="josefk", description="A Kafka broker in Python.")
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run a broker")
    serve.add_argument("config", nargs="?", type=Path, help="a Kafka server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config, as kafka-server-start.sh --override does")
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    dump = commands.add_parser(
        "dump-log", help="print the batches of log segments and check their index files"
    )
    dump.add_argument("paths", nargs="+", metavar="PATH", help=".log, .index or .timeindex files")
    dump.add_argument("--print-records", action="store_true", help="also print every record")
    from josefk.server.admin.commands import COMMANDS

    for name, text in COMMANDS.items():  # their arguments are built only when one runs
        commands.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    from josefk.server.admin.commands import COMMANDS

    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS:
        from josefk.server.admin.commands import main as admin

        return admin(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "dump-log":
        from josefk.log.dump import dump_files

        return dump_files(args.paths, print_records=args.print_records, out=sys.stdout)
    if args.command == "serve":
        return serve(args)
    parser.print_help()
    return 2


def serve(args: argparse.Namespace) -> int:
    import trio

    from josefk.server.broker import Broker
    from josefk.server.config.broker import load_config
    from josefk.server.config.values import ConfigError

    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"josefk: --override needs KEY=VALUE, not {item!r}", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    try:
        config = load_config(args.config, overrides)
    except (ConfigError, OSError) as e:
        print(f"josefk: {e}", file=sys.stderr)
        return 2
    fatal_types: tuple[type[Exception], ...] = (ConfigError,)
    if config.zookeeper_connect:  # a single broker imports neither kazoo nor the controller
        from josefk.cluster.controller.membership import BrokerIdInUseError
        from josefk.server.control.zk_bridge import ZooKeeperUnavailableError

        fatal_types += (BrokerIdInUseError, ZooKeeperUnavailableError)
    raise_fd_limit()
    fatal: list[BaseException] = []
    try:
        trio.run(_run, Broker(config))
    except* fatal_types as group:
        fatal.extend(_leaves(group))
    for error in fatal:
        logging.getLogger("josefk").error("fatal: %s", error)
        print(f"josefk: {error}", file=sys.stderr)
    return 1 if fatal else 0


def _leaves(error: BaseException) -> list[BaseException]:
    """The plain exceptions inside (nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def _run(broker: object) -> None:
    import trio

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_on_signal, nursery.cancel_scope, broker)
        await broker.serve()  # type: ignore[attr-defined]
        nursery.cancel_scope.cancel()


async def _cancel_on_signal(scope: object, broker: object) -> None:
    import trio

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logging.getLogger("josefk").info("%s received: shutting down",
                                             signal.Signals(signum).name)
            await broker.controlled_shutdown()  # type: ignore[attr-defined]
            scope.cancel()  # type: ignore[attr-defined]
            return


def raise_fd_limit() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as the JVM does for Kafka.

    Every connection, segment and index map holds a descriptor.
    """
    log = logging.getLogger("josefk")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        log.info("open file limit (RLIMIT_NOFILE) is %s", _limit(soft))
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.warning("could not raise the open file limit (RLIMIT_NOFILE) from %s to %s: %s",
                    _limit(soft), _limit(hard), e)
        return
    from josefk.log.file_cache import FILES

    FILES.limit_changed()
    log.info("raised the open file limit (RLIMIT_NOFILE) from %s to %s", _limit(soft),
             _limit(hard))


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)

if __name__ == "__main__":
    sys.exit(main())
