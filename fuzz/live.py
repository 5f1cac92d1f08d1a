"""Live fuzzing: a real broker subprocess per listener kind, fed mutated request frames on
fresh connections (several frames pipelined on one), before and after authentication.

Two engines share the run's time: atheris's mutator over the seed corpus (in a process of its
own, ``python -m fuzz.live --worker``, as libFuzzer ends its process) and hypothesis strategies
built from the request schemas (``strategies``). After every batch the broker must still answer
ApiVersions and Metadata on a clean connection within 10 s; its RSS is sampled then. A crash:
the broker died, stopped answering, or logged an internal error (a traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import ssl
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from compat_tests.certs import Certs
from josefk.protocol.exceptions import ProtocolError
from josefk.protocol.header import parse_request_header

from .broker import FuzzBroker, LogWatch, rss_kb
from .client import MECHANISMS, Endpoint, LoginFailed, clean_check, connect, send_case
from .report import CRASH_DIR, Result, run_child
from .seeds import request_frames, sasl_exchanges

CHECK_EVERY = 50  # cases between two health checks
CHECK_SECONDS = 2.0  # or seconds, whichever comes first
CLEAN_TIMEOUT = 10.0


class Session:
    """Sends cases to one listener and watches the broker: its log after every case, its
    health and RSS after every batch."""

    def __init__(self, endpoint: Endpoint, pid: int, log: LogWatch, result: Result,
                 crash_dir: Path = CRASH_DIR) -> None:
        self.endpoint, self.pid, self.log, self.result = endpoint, pid, log, result
        self.crash_dir = crash_dir
        self.recent: deque[bytes] = deque(maxlen=4)
        self.dead = False
        self.answered = 0  # cases the broker sent something back to
        self.enabled: frozenset[int] = frozenset()  # the apis it serves
        self.since_check, self.last_check = 0, time.monotonic()

    def run_case(self, flags: int, stream: bytes) -> None:
        """One case: flags (see ``strategies.cases``) and the bytes sent on a new connection."""
        if self.dead:
            return
        self.result.inputs += 1
        self.since_check += 1
        self.recent.append(bytes([flags & 0xFF]) + stream)
        try:
            sock = self._open(flags)
        except (OSError, ssl.SSLError, LoginFailed, ValueError):
            self.check()  # a normal login failed: is the broker still there?
            return
        if send_case(sock, stream):
            self.answered += 1
        self.scan_log()
        if self.since_check >= CHECK_EVERY or time.monotonic() - self.last_check > CHECK_SECONDS:
            self.check()

    def _open(self, flags: int) -> socket.socket:
        endpoint = self.endpoint
        secure = bool(flags & 1) or endpoint.listener == "PLAINTEXT"
        mechanism = MECHANISMS[(flags >> 1) % 3]
        try:
            return connect(endpoint, secure=secure, mechanism=mechanism,
                           client_cert=bool(flags & 8))
        except LoginFailed:
            if mechanism == "PLAIN":
                raise
            # Fuzzed AlterUserScramCredentials may have changed the SCRAM user.
            return connect(endpoint, secure=secure, client_cert=bool(flags & 8))

    def scan_log(self) -> None:
        for error in self.log.errors():
            self.crash(error.signature, error.text)

    def crash(self, signature: str, detail: str) -> None:
        recent = "\n".join(case.hex() for case in self.recent)
        self.result.crash(signature, self.recent[-1] if self.recent else b"",
                          f"{detail}\n\nlast cases (hex: flags byte, then the bytes sent), "
                          f"oldest first:\n{recent}\n", self.crash_dir)

    def check(self) -> bool:
        """The broker alive and answering a clean client; its RSS sampled."""
        self.since_check, self.last_check = 0, time.monotonic()
        if self.dead:
            return False
        problem = None
        try:
            self.enabled = clean_check(self.endpoint, CLEAN_TIMEOUT)
        except Exception as e:
            problem = f"broker stopped answering a clean client within {CLEAN_TIMEOUT:.0f} s"
            detail = repr(e)
        rss = rss_kb(self.pid)
        if rss is None:
            problem, detail = "broker process died", f"pid {self.pid} gone"
        self.scan_log()
        if problem is not None:
            self.crash(problem, detail)
            self.dead = True
            return False
        self.result.rss_end_kb = rss
        return True


def seed_cases(endpoint: Endpoint, enabled: frozenset[int]) -> list[bytes]:
    """Flags byte + stream: every request frame of the apis the broker serves after
    authentication (logins and client certificate varied), the SASL exchanges before it, and
    for TLS a ClientHello."""
    frames = [f for f in request_frames() if int.from_bytes(f[4:6], "big") in enabled]
    cases = [bytes([1 | (i % 3) << 1 | (i & 1) << 3]) + frame for i, frame in enumerate(frames)]
    cases += [b"\0" + b"".join(exchange) for exchange in sasl_exchanges()]
    if endpoint.tls:
        cases.append(b"\0" + endpoint.client_hello())
    return cases


def pack(cases: list[bytes]) -> bytes:
    """Cases as one file for the worker (building them takes seconds)."""
    return b"".join(len(case).to_bytes(4, "big") + case for case in cases)


def unpack(data: bytes) -> list[bytes]:
    frames = split_frames(data)
    assert frames is not None
    return frames


def split_frames(stream: bytes) -> list[bytes] | None:
    """The payloads of a stream of whole frames, or None if it is not one."""
    frames, pos = [], 0
    while pos < len(stream):
        size = int.from_bytes(stream[pos:pos + 4], "big", signed=True)
        if size < 0 or pos + 4 + size > len(stream):
            return None
        frames.append(stream[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames


def mutate(case: bytes, rng: random.Random, pool: list[bytes],
           mutator: Callable[[bytes, int], bytes]) -> tuple[int, bytes]:
    """Atheris's mutator on one frame (mostly its body alone, the header kept), its size
    prefix then fixed; sometimes on the whole stream, sizes too; sometimes another seed's
    frame pipelined after it."""
    flags, stream = case[0], case[1:]
    if rng.random() < 0.1:
        flags = rng.randrange(16)
    frames = split_frames(stream)
    for _ in range(rng.choice((1, 1, 2, 3))):
        if frames and rng.random() < 0.9:
            i = rng.randrange(len(frames))
            frames[i] = _mutate_frame(frames[i], rng, mutator)
        if frames and rng.random() < 0.1:
            frames.append(rng.choice(pool)[5:])
    if frames is not None:
        stream = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
    if frames is None or rng.random() < 0.1:
        stream = mutator(stream, len(stream) + 64)
    return flags, stream


def _mutate_frame(payload: bytes, rng: random.Random,
                  mutator: Callable[[bytes, int], bytes]) -> bytes:
    start = 0
    if rng.random() < 0.8:
        with contextlib.suppress(ProtocolError):
            start = parse_request_header(payload).body_offset
    return payload[:start] + mutator(payload[start:], len(payload) - start + 64)


def worker(args: argparse.Namespace) -> None:
    """The atheris engine: libFuzzer drives, every input picks a seed case and mutates it."""
    import atheris

    config = json.loads(Path(args.worker).read_text())
    endpoint = Endpoint(**config["endpoint"])
    result = Result(config["target"])
    session = Session(endpoint, config["pid"], LogWatch(Path(config["log"]), config["offset"]),
                      result, Path(config["crash_dir"]))
    pool = unpack(Path(config["seeds"]).read_bytes())
    started = time.monotonic()
    deadline = started + args.seconds

    def finish() -> None:
        session.check()
        result.notes.append(f"atheris: {result.inputs} cases, {session.answered} answered")
        result.seconds = time.monotonic() - started
        result.save(args.result)
        sys.stdout.flush()
        os._exit(0)  # libFuzzer's own exit skips Python's atexit; nothing else to clean up

    def one(data: bytes) -> None:
        rng = random.Random(data)
        session.run_case(*mutate(rng.choice(pool), rng, pool, atheris.Mutate))
        if session.dead or result.inputs >= args.max_inputs or time.monotonic() >= deadline:
            finish()

    # The broker's coverage is not visible here: libFuzzer's inputs only seed the choices.
    atheris.Setup([sys.argv[0], f"-max_total_time={int(args.seconds) + 60}", "-max_len=64",
                   "-timeout=120"], one)
    atheris.Fuzz()
    finish()


def run_hypothesis(session: Session, seconds: float, max_inputs: int) -> None:
    """The hypothesis engine: batches of generated cases, a health check after each."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings

    from .strategies import cases

    deadline = time.monotonic() + seconds
    limit = session.result.inputs + max_inputs

    @settings(max_examples=CHECK_EVERY, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @given(cases(session.enabled))
    def batch(case: tuple[int, bytes]) -> None:
        if time.monotonic() < deadline and session.result.inputs < limit:
            session.run_case(*case)

    while (time.monotonic() < deadline and session.result.inputs < limit
           and not session.dead):
        batch()
        session.check()


def run_listener(listener: str, seconds: float, max_inputs: int, workdir: Path, certs: Certs,
                 crash_dir: Path = CRASH_DIR) -> Result:
    """Both engines, half the time (their start-up aside) and count each, against a fresh
    broker."""
    target = f"live-{listener}"
    result = Result(target)
    workdir.mkdir(parents=True, exist_ok=True)
    broker = FuzzBroker(workdir, certs)
    fuzz_started = time.monotonic()
    try:
        broker.start()
        endpoint = broker.endpoint(listener)
        session = Session(endpoint, broker.pid, LogWatch(broker.log_path), result, crash_dir)
        if not session.check():
            return result
        result.rss_start_kb = result.rss_end_kb
        (workdir / "seeds.bin").write_bytes(pack(seed_cases(endpoint, session.enabled)))
        config = {"endpoint": asdict(endpoint), "pid": broker.pid, "log": str(broker.log_path),
                  "offset": session.log.offset, "target": target, "crash_dir": str(crash_dir),
                  "seeds": str(workdir / "seeds.bin")}
        fuzz_started, half = time.monotonic(), seconds / 2
        (workdir / "worker.json").write_text(json.dumps(config))
        found = run_child("fuzz.live", ["--worker", str(workdir / "worker.json"),
                                        "--seconds", str(half), "--max-inputs",
                                        str(max_inputs // 2)],
                          f"{target}-atheris", workdir, timeout=half + 120)
        result.inputs += found.inputs
        for signature, path in found.crashes.items():
            result.crashes.setdefault(signature, path)
        session.log = LogWatch(broker.log_path, broker.log_path.stat().st_size)
        if session.check():
            run_hypothesis(session, half, max_inputs - result.inputs)
        session.check()
        result.notes += found.notes
        result.notes.append(f"hypothesis: {result.inputs - found.inputs} cases, "
                            f"{session.answered} answered")
    except RuntimeError as e:
        result.crashes.setdefault(str(e), "")
    finally:
        result.seconds = time.monotonic() - fuzz_started  # fuzzing, not start and stop
        try:
            broker.stop()
        except AssertionError as e:  # the suite's Broker: SIGTERM ignored
            result.crashes.setdefault("broker ignored SIGTERM", str(e))
    for error in LogWatch(broker.log_path).errors():  # anything the sessions missed
        result.crashes.setdefault(error.signature, str(broker.log_path))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m fuzz.live")
    parser.add_argument("--worker", required=True, help="the run's settings (JSON)")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--max-inputs", type=int, default=10**9)
    parser.add_argument("--result", type=Path, required=True)
    worker(parser.parse_args())


if __name__ == "__main__":
    main()
