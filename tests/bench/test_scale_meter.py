"""The scale bench's step meter: the broker's CPU over a step, read from /proc."""

import subprocess
import sys
from types import SimpleNamespace

from bench.scale import StepMeter

# Once told to, burns 0.3 s of CPU time, says so, then idles until killed.
BURN = """
import sys, time
sys.stdin.readline()
start = time.process_time()
while time.process_time() - start < 0.3:
    pass
print("burnt", flush=True)
time.sleep(60)
"""


def test_the_meter_counts_the_cpu_the_broker_spent_during_the_step() -> None:
    broker = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert broker.stdin is not None and broker.stdout is not None
    try:
        meter = StepMeter(SimpleNamespace(kind="josefk", pid=broker.pid), "josefk-1-step", None)
        broker.stdin.write("go\n")
        broker.stdin.flush()
        assert broker.stdout.readline() == "burnt\n"
        got = meter.result()
    finally:
        broker.kill()
        broker.wait()
    # The interpreter's own start-up may fall on either side of the meter's first look.
    assert 0.28 <= got["broker_user_s"] + got["broker_sys_s"] <= 1.0
    assert got["step_wall_s"] > 0
    assert "profile" not in got  # not a step named by --profile
