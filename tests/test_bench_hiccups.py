"""The hiccup meter: a process held off its CPUs shows as a stall, with when."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from rocklet.benchsuite.measure import CpuWindow

# A child that runs the meter, says when it is ticking, and prints its summaries
# once told to stop (a line on stdin).
_CHILD = """
import json, sys, time
from rocklet.benchsuite.measure import HiccupMeter
meter = HiccupMeter()
meter.start()
began = time.monotonic()
print("ready", flush=True)
sys.stdin.readline()
meter.stop()
print(json.dumps({"all": meter.summary(), "before": meter.summary(0.0, began - 1.0)}))
"""

_PAUSE_S = 0.2


def test_a_paused_process_shows_one_stall_as_long_as_the_pause() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGSTOP)
        time.sleep(_PAUSE_S)  # the fault: the machine holds the process this long
        child.send_signal(signal.SIGCONT)
        out, _ = child.communicate("stop\n", timeout=30)
    finally:
        child.kill()
    found = json.loads(out)
    assert found["all"]["max_ms"] >= _PAUSE_S * 1e3 * 0.9
    assert found["all"]["stalls"] >= 1
    assert found["all"]["stalled_ms"] >= found["all"]["max_ms"]
    # A window that ended before the meter started has seen nothing.
    assert {k: found["before"][k] for k in ("max_ms", "stalls", "stalled_ms")} == {
        "max_ms": 0.0, "stalls": 0, "stalled_ms": 0.0,
    }  # fmt: skip
    # The real-time class where the process may have it (root, CAP_SYS_NICE).
    assert found["all"]["realtime"] == _may_be_realtime()


def _may_be_realtime() -> bool:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


def test_the_cpu_window_reports_steal_in_cores() -> None:
    with CpuWindow(None) as window:
        pass
    found = window.as_dict()
    assert found["steal_cores"] >= 0.0
    assert set(found) == {"wall_s", "server_cpu_s", "client_cpu_s", "other_cores", "steal_cores"}
