"""The plugin loads into every pytest run where josefk is installed: it must cost nothing
until a fixture runs, and a run can turn it off by its name."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

HEAVY = ("josefk.server", "josefk.cluster", "josefk.log", "josefk.protocol", "trio", "kafka",
         "kazoo", "confluent_kafka")


def test_loading_the_plugin_imports_nothing_of_the_broker() -> None:
    code = ("import sys, pytest\n"
            "before = set(sys.modules)\n"
            "import josefk.testing.plugin\n"
            "print('\\n'.join(sorted(set(sys.modules) - before)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    loaded = done.stdout.split()
    assert "josefk.testing.plugin" in loaded
    assert [m for m in loaded if m.startswith(HEAVY)] == []


def test_the_entry_point_registers_it_as_josefk(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_it(kafka_broker):
            assert kafka_broker.startswith("127.0.0.1:")
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    disabled = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:josefk")
    disabled.assert_outcomes(errors=1)
    disabled.stdout.fnmatch_lines(["*fixture 'kafka_broker' not found*"])
