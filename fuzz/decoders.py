"""Coverage-guided fuzzing (atheris) of what a peer's bytes reach before any handler: the
frame splitter, the request decoders of every api, the SASL state machine and mechanisms.

Run only as its own process (``python -m fuzz.decoders``, started by ``python -m fuzz``):
josefk and kafka-python are imported under atheris's instrumentation, and libFuzzer ends the
process when done. Byte 0 of an input picks the sub-target (its low 3 bits) and the size of
the pieces the stream is fed in (the rest); the other bytes go to the sub-target:

- 0-2: a byte stream through ``FrameDecoder`` (small buffers, to reach the big-frame path),
  every frame to ``decode_request`` with every api enabled;
- 3-4: a SASL connection: the frames through ``Authenticator`` as the broker drives it;
- 5-6: tokens (split at ``ff ff``) to a PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 server;
- 7: JAAS configuration text.

Only ``ProtocolError`` (decoders), ``SaslStateError`` (the state machine),
``AuthenticationError`` (mechanisms) and ``JaasConfigError`` may escape; anything else is a
crash, counted once per (type, frame) and its input kept in ``fuzz-crashes/``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import atheris
from kafka.protocol.api_key import ApiKey  # kafka-python's compiled codecs are generated code

with atheris.instrument_imports(include=["josefk"]):
    from josefk.protocol.exceptions import ProtocolError, UnsupportedVersionError
    from josefk.protocol.framing import FrameDecoder
    from josefk.protocol.header import parse_request_header
    from josefk.protocol.messages import (
        API_CLASSES,
        api_versions_unsupported_frame,
        decode_request,
        encode_response,
    )
    from josefk.server.security.authentication import (
        Authenticator,
        SaslConfig,
        SaslStateError,
    )
    from josefk.server.security.errors import AuthenticationError
    from josefk.server.security.jaas import JaasConfigError, parse_jaas_config
    from josefk.server.security.mechanisms import MECHANISMS, create_server
    from josefk.server.security.scram import ScramServer, credential_from_password
    from josefk.server.security.scram_client import ScramClient

from .report import CRASH_DIR, Result, exception_signature
from .seeds import PLAIN_LOGIN, request_frames, sasl_exchanges

ALL_APIS = frozenset(API_CLASSES)
SASL_KEYS = frozenset({ApiKey.ApiVersions, ApiKey.SaslHandshake, ApiKey.SaslAuthenticate})
SASL_MAX_RECEIVE = 524288  # sasl.server.max.receive.size
PLAIN_USERS = {"alice": "alice-secret"}
TOKEN_SEPARATOR = b"\xff\xff"  # never in UTF-8, so in no valid token
SERVER_NONCE = "fuzzservernonce"
CREDENTIALS = {(m, "scram-alice"): credential_from_password(m, "scram-secret", b"fuzz-salt")
               for m in MECHANISMS[1:]}


def lookup(mechanism: str, user: str):  # type: ignore[no-untyped-def]
    return CREDENTIALS.get((mechanism, user))


def _frames(stream: bytes, step: int, max_size: int) -> list[bytes | bytearray]:
    """The stream fed ``step`` bytes at a time; the frames up to a bad size prefix."""
    decoder = FrameDecoder(max_size=max_size, scratch=bytearray(512), own_buffer_from=64)
    frames: list[bytes | bytearray] = []
    try:
        for i in range(0, len(stream), step):
            decoder.feed(stream[i:i + step])
            frames.extend(decoder.frames())
    except ProtocolError:
        pass
    return frames


def decode_stream(stream: bytes, step: int) -> None:
    for frame in _frames(stream, step, 1 << 20):
        try:
            decode_request(frame, ALL_APIS)
        except UnsupportedVersionError as e:
            if e.api_key == ApiKey.ApiVersions:
                api_versions_unsupported_frame(e.correlation_id)
        except ProtocolError:
            pass


def sasl_connection(stream: bytes, step: int) -> None:
    """What ``Connection._handle`` does with each frame until authenticated (and after, for
    re-authentication), answers encoded as the connection would."""
    config = SaslConfig(MECHANISMS, plain_users=PLAIN_USERS, scram_credentials=lookup,
                        reauth_ms=60_000 if step % 2 else 0)
    auth = Authenticator(config, "fuzz:1", clock=lambda: 0.0)
    for frame in _frames(stream, step, SASL_MAX_RECEIVE):
        if not auth.authenticated:
            if auth.expects_raw_token:
                if auth.raw_token(bytes(frame)).close:
                    return
                continue
            if parse_request_header(frame).api_key not in SASL_KEYS:
                return
        request = decode_request(frame, ALL_APIS)
        if auth.intercepts(request.api_key):
            if request.api_key == ApiKey.SaslHandshake:
                answer = auth.handshake(request.api_version, request.body.mechanism)
            else:
                answer = auth.authenticate(request.api_version, bytes(request.body.auth_bytes))
            if answer.body is not None:
                encode_response(request.api_key, request.api_version, request.correlation_id,
                                answer.body)
            if answer.close:
                return
        else:
            auth.admit(request.api_key)


def mechanism_tokens(data: bytes, step: int) -> None:
    mechanism = MECHANISMS[step % 3]
    server = (ScramServer(mechanism, lookup, server_nonce=SERVER_NONCE) if step % 3 else
              create_server(mechanism, plain_users=PLAIN_USERS))
    for token in data.split(TOKEN_SEPARATOR):
        server.evaluate(token)
        if server.complete:
            assert server.authorization_id


def jaas(data: bytes) -> None:
    parse_jaas_config(data.decode("utf-8", "replace"))


EXPECTED = (ProtocolError, SaslStateError, AuthenticationError, JaasConfigError)


def run_one(data: bytes) -> None:
    """One input, every exception let through (for replaying a crash)."""
    if not data:
        return
    kind, step, rest = data[0] & 7, (data[0] >> 3) + 1, data[1:]
    if kind <= 2:
        decode_stream(rest, step)
    elif kind <= 4:
        sasl_connection(rest, step)
    elif kind <= 6:
        mechanism_tokens(rest, step)
    else:
        jaas(rest)


def seed_inputs() -> list[bytes]:
    """Each request frame alone, the SASL exchanges, and the mechanisms' exchanges."""
    inputs = [bytes([8 * 31]) + frame for frame in request_frames()]  # 32-byte pieces
    inputs += [bytes([3 + 8 * 31]) + b"".join(x) for x in sasl_exchanges()]
    inputs.append(bytes([5]) + PLAIN_LOGIN)
    for i, mechanism in ((1, MECHANISMS[1]), (2, MECHANISMS[2])):
        client = ScramClient(mechanism, "scram-alice", "scram-secret", nonce="fuzznonce")
        server = ScramServer(mechanism, lookup, server_nonce=SERVER_NONCE)
        first = client.evaluate(b"")
        final = client.evaluate(server.evaluate(first))
        inputs.append(bytes([5 + 8 * i]) + first + TOKEN_SEPARATOR + final)
    inputs.append(bytes([7]) + b'org.apache.kafka.common.security.plain.PlainLoginModule '
                  b'required username="a" user_a="b";')
    return inputs


class Target:
    """Counts inputs, records crashes, and ends the process at its time or count bound."""

    def __init__(self, result: Result, result_path: Path, seconds: float, max_inputs: int,
                 crash_dir: Path, corpus: Path) -> None:
        self.result, self.result_path, self.crash_dir = result, result_path, crash_dir
        self.corpus = corpus
        self.started = time.monotonic()
        self.deadline, self.max_inputs = self.started + seconds, max_inputs

    def __call__(self, data: bytes) -> None:
        self.result.inputs += 1
        try:
            run_one(data)
        except EXPECTED:
            pass
        except Exception as e:
            import traceback
            self.result.crash(exception_signature(e), data, traceback.format_exc(),
                              self.crash_dir)
        if self.result.inputs >= self.max_inputs or time.monotonic() >= self.deadline:
            self.finish()

    def finish(self) -> None:
        self.result.seconds = time.monotonic() - self.started
        self.result.save(self.result_path)
        shutil.rmtree(self.corpus, ignore_errors=True)
        sys.stdout.flush()
        os._exit(0)  # libFuzzer's own exit skips Python's atexit; nothing else to clean up


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m fuzz.decoders")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--max-inputs", type=int, default=10**9)
    parser.add_argument("--result", type=Path, help="where to write the result (JSON)")
    parser.add_argument("--crash-dir", type=Path, default=CRASH_DIR)
    parser.add_argument("--replay", type=Path, nargs="*", help="run these inputs and raise")
    args = parser.parse_args()
    if args.replay:
        for path in args.replay:
            run_one(path.read_bytes())
            print(f"{path}: no crash")
        return
    corpus = Path(tempfile.mkdtemp(prefix="fuzz-decoders-corpus-"))
    for i, seed in enumerate(seed_inputs()):
        (corpus / f"seed-{i:04d}").write_bytes(seed)
    result_path = args.result or Path("decoders-result.json")
    target = Target(Result("decoders"), result_path, args.seconds, args.max_inputs,
                    args.crash_dir, corpus)
    # libFuzzer's time bound is a backstop: Target ends the run itself.
    atheris.Setup([sys.argv[0], str(corpus), f"-max_total_time={int(args.seconds) + 30}",
                   "-max_len=16384", "-timeout=60", "-rss_limit_mb=4096",
                   "-use_value_profile=1", "-print_final_stats=1"], target)
    atheris.Fuzz()
    target.finish()


if __name__ == "__main__":
    main()
