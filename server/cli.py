"""The ``josefk`` command line."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="josefk", description="A Kafka broker in Python.")
    parser.add_argument("--version", action="version", version=f"josefk {version('josefk')}")
    commands = parser.add_subparsers(dest="command")
    dump = commands.add_parser(
        "dump-log", help="print the batches of log segments and check their index files"
    )
    dump.add_argument("paths", nargs="+", metavar="PATH", help=".log, .index or .timeindex files")
    dump.add_argument("--print-records", action="store_true", help="also print every record")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "dump-log":
        from josefk.log.dump import dump_files

        return dump_files(args.paths, print_records=args.print_records, out=sys.stdout)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
