"""Starting RocketMQ for the benchmark and the Java tier survives losing a port.

``start_rocketmq`` picks free ports (for the broker, one whose two neighbours are free
too), then the JVM binds them seconds later; another process may take one in between.
Here one really is taken: the first port chosen is already listening, so the first JVM
dies with "Address already in use", and the second one, on new ports, comes up.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from rocklet.benchsuite.procs import LOOPBACK, PeerStartError
from rocklet.benchsuite.vsrmq import servers
from rocklet.benchsuite.vsrmq.configs import free_broker_port
from tests.java.javatier import release, tier_marks

pytestmark = tier_marks(180)


def _taken_port() -> socket.socket:
    """A listening socket on a port whose neighbours are free: only the port is taken."""
    sock = socket.socket()
    sock.bind((LOOPBACK, free_broker_port()))
    sock.listen()
    return sock


@pytest.mark.parametrize(
    ("server", "chooser"), [("broker", "free_broker_port"), ("namesrv", "free_port")]
)
def test_a_server_that_lost_its_port_to_another_process_starts_on_new_ones(
    server: str, chooser: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = getattr(servers, chooser)
    with _taken_port() as taken:
        port = taken.getsockname()[1]
        ports = [port]
        monkeypatch.setattr(servers, chooser, lambda: ports.pop() if ports else real())
        running = servers.start_rocketmq(release(), tmp_path, 120.0)
        try:
            assert f"{LOOPBACK}:{port}" not in (running.namesrv, running.broker_addr)
            assert "Address already in use" in (tmp_path / f"{server}.out").read_text()
            assert "boot success" in (tmp_path / f"{server}.2.out").read_text()
        finally:
            running.stop(5.0)


def test_a_port_lost_every_time_fails_after_three_attempts(tmp_path: Path) -> None:
    with _taken_port() as taken:
        # Appended last, this line overrides every port the start chooses.
        conf = {"listenPort": str(taken.getsockname()[1])}
        with pytest.raises(PeerStartError, match="Address already in use"):
            servers.start_rocketmq(release(), tmp_path, 60.0, conf)
    assert (tmp_path / "broker.3.out").exists()
    assert not (tmp_path / "broker.4.out").exists()


def test_any_other_start_failure_is_not_retried(tmp_path: Path) -> None:
    # RocketMQ refuses a slave with broker id 0 at start and exits: no race to retry.
    with pytest.raises(PeerStartError):
        servers.start_rocketmq(release(), tmp_path, 60.0, {"brokerRole": "SLAVE"})
    assert "brokerId must be" in (tmp_path / "broker.out").read_text()
    assert not (tmp_path / "broker.2.out").exists()
