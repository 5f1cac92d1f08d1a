"""What a user sees when a broker fixture cannot start or its broker crashes: a clear
failure or error of the test, never a hang (pytester runs the user's test file)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def test_a_bad_config_value_fails_the_test_naming_the_key(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.kafka_broker_config({"num.partitions": "many"})
        def test_it(kafka_broker):
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*kafka_broker: *num.partitions*"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_a_port_in_use_fails_the_test_with_the_reason(pytester: pytest.Pytester) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        pytester.makepyfile(f"""
            import pytest

            @pytest.fixture
            def kafka_broker_config():
                return {{"listeners": "PLAINTEXT://127.0.0.1:{port}"}}

            def test_it(kafka_broker):
                pass
        """)
        result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*kafka_broker: the josefk broker failed*"])


def test_a_broker_crash_during_a_test_is_an_error_at_teardown(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import trio

        def explode():
            raise RuntimeError("the broker's loop broke")

        def test_it(kafka_broker):
            # An exception escaping a callback kills the broker's trio.run.
            broker = kafka_broker.broker
            broker._token.run_sync_soon(explode)
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*BrokerCrashed: the josefk broker failed*"])


@pytest.mark.timeout(300)
def test_a_cluster_broker_that_dies_by_itself_is_an_error_at_teardown(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import os
        import signal

        def test_it(kafka_cluster):
            # Not through .kill(): as if the broker had crashed.
            os.kill(kafka_cluster.brokers[2].pid, signal.SIGKILL)
            kafka_cluster.brokers[2].process.proc.wait(30)
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*kafka_cluster: broker 2 died during the tests (status -9)*"])


def test_without_java_the_cluster_tests_skip_saying_why(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no java here
    monkeypatch.delenv("JAVA_HOME", raising=False)
    pytester.makepyfile("""
        def test_it(kafka_cluster):
            raise AssertionError("ran without ZooKeeper")
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*kafka_cluster needs Java 11 or later*"])
