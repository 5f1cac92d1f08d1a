"""``python -m fuzz``: the decoder target, then a live broker per listener kind; per target
the inputs tried, distinct crashes and the broker's RSS; non-zero exit on any crash (or RSS
growth over the bound)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from .report import CRASH_DIR, Result, run_child

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _mb(kb: int | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.1f}"


def print_table(results: list[Result]) -> None:
    print(f"{'target':<22} {'seconds':>7} {'inputs':>9} {'inputs/s':>9} {'crashes':>7} "
          f"{'RSS start MB':>12} {'end MB':>7} {'growth MB':>9}")
    for r in results:
        rate = r.inputs / r.seconds if r.seconds else 0.0
        print(f"{r.target:<22} {r.seconds:>7.1f} {r.inputs:>9} {rate:>9.1f} {len(r.crashes):>7} "
              f"{_mb(r.rss_start_kb):>12} {_mb(r.rss_end_kb):>7} {_mb(r.rss_growth_kb):>9}")
    for r in results:
        for signature, path in r.crashes.items():
            print(f"CRASH {r.target}: {signature}  [{path}]")
        for note in r.notes:
            print(f"note {r.target}: {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60,
                        help="per listener kind, and for the decoder target (default 60)")
    parser.add_argument("--decoder-seconds", type=float, default=None,
                        help="for the decoder target (default: --seconds; 0 skips it)")
    parser.add_argument("--listeners", default=",".join(LISTENERS),
                        help="comma-separated listener kinds, or '' for none")
    parser.add_argument("--max-inputs", type=int, default=10**9, help="per target")
    parser.add_argument("--max-rss-growth-mb", type=float, default=100.0)
    parser.add_argument("--crash-dir", type=Path, default=CRASH_DIR)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="brokers' data and logs (default: a temporary directory, kept "
                        "when something failed)")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = parser.parse_args(argv)
    listeners = [name for name in args.listeners.split(",") if name]
    unknown = set(listeners) - set(LISTENERS)
    if unknown:
        parser.error(f"unknown listener kinds: {sorted(unknown)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="josefk-fuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    decoder_seconds = args.seconds if args.decoder_seconds is None else args.decoder_seconds
    results = []
    if decoder_seconds > 0:
        results.append(run_child("fuzz.decoders", [
            "--seconds", str(decoder_seconds), "--max-inputs", str(args.max_inputs),
            "--crash-dir", str(args.crash_dir)], "decoders", workdir,
            timeout=decoder_seconds + 120))
        print_table(results[-1:])
    if listeners:
        from compat_tests.certs import make_certs

        from .live import run_listener

        (workdir / "certs").mkdir(exist_ok=True)
        certs = make_certs(workdir / "certs")
        for listener in listeners:
            results.append(run_listener(listener, args.seconds, args.max_inputs,
                                        workdir / listener, certs, args.crash_dir))
            print_table(results[-1:])
    print()
    print_table(results)
    crashes = sum(len(r.crashes) for r in results)
    too_big = [r.target for r in results
               if (r.rss_growth_kb or 0) > args.max_rss_growth_mb * 1024]
    failed = bool(crashes or too_big)
    print(f"\n{sum(r.inputs for r in results)} inputs, {crashes} distinct crashes"
          + (f", RSS growth over {args.max_rss_growth_mb:.0f} MB: {', '.join(too_big)}"
             if too_big else ""))
    if args.json:
        print(json.dumps({"results": [r.to_json() for r in results], "failed": failed}))
    if failed:
        print(f"brokers' logs kept in {workdir}; crashing inputs in {args.crash_dir}")
    elif args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
