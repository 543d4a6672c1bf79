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

from rocklet.benchsuite.procs import PeerStartError, free_port
from rocklet.benchsuite.vsrmq import servers
from rocklet.benchsuite.vsrmq.configs import free_broker_port
from tests.java.javatier import release, tier_marks

pytestmark = tier_marks(180)


def _taken_port() -> socket.socket:
    """A listening socket on a port that passes ``free_broker_port``'s checks but its own."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", free_broker_port()))
    sock.listen()
    return sock


def test_a_broker_that_lost_its_port_to_another_process_starts_on_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _taken_port() as taken:
        ports = [taken.getsockname()[1]]

        def first_taken() -> int:
            return ports.pop() if ports else free_broker_port()

        monkeypatch.setattr(servers, "free_broker_port", first_taken)
        running = servers.start_rocketmq(release(), tmp_path, 120.0)
        try:
            assert running.broker_addr is not None
            assert running.broker_addr != f"127.0.0.1:{taken.getsockname()[1]}"
            assert "Address already in use" in (tmp_path / "broker.out").read_text()
            assert "boot success" in (tmp_path / "broker.2.out").read_text()
        finally:
            running.stop(5.0)


def test_a_name_server_that_lost_its_port_starts_on_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = [taken.getsockname()[1]]

        def first_taken() -> int:
            return ports.pop() if ports else free_port()

        monkeypatch.setattr(servers, "free_port", first_taken)
        running = servers.start_rocketmq(release(), tmp_path, 120.0)
        try:
            assert not running.namesrv.endswith(f":{taken.getsockname()[1]}")
            assert "Address already in use" in (tmp_path / "namesrv.out").read_text()
            assert "boot success" in (tmp_path / "namesrv.2.out").read_text()
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
