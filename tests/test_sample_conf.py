"""The sample conf/broker.conf: Rocklet's defaults under RocketMQ's names, and it runs."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

from structlog.testing import capture_logs

from rocklet.broker.config import BrokerConfig, load_broker_config, parse_properties
from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode
from rocklet.transport.dial import open_connection
from tests.test_cli import BROKER_LISTENING, TIMEOUT, spawn

SAMPLE = Path(__file__).resolve().parents[1] / "conf" / "broker.conf"
#: An example to uncomment: "#key=value" (descriptive comments have a space after #).
EXAMPLE = re.compile(r"^#(\w+=.*)$", re.MULTILINE)


def test_the_sample_sets_rocklets_defaults_without_warnings() -> None:
    with capture_logs() as logs:
        config = load_broker_config(SAMPLE, environ={})
    assert logs == []
    assert config == BrokerConfig()  # it documents the defaults, it changes nothing
    assert len(parse_properties(SAMPLE.read_text())) >= 20


def test_the_commented_examples_are_valid_keys_and_values(tmp_path: Path) -> None:
    examples = EXAMPLE.findall(SAMPLE.read_text())
    assert {line.split("=")[0] for line in examples} >= {"namesrvAddr", "brokerIP1"}
    uncommented = tmp_path / "broker.conf"
    uncommented.write_text(EXAMPLE.sub(r"\1", SAMPLE.read_text()))
    with capture_logs() as logs:
        config = load_broker_config(uncommented, environ={})
    assert logs == []
    assert config.broker_ip1 == "192.0.2.10" and config.metrics_port == 5557
    assert config.store_path_root_dir == Path.home() / "store"


async def test_a_broker_starts_from_the_sample(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = await spawn(
        "standalone",
        "-c",
        str(SAMPLE),
        "--data-dir",
        str(data),
        "--namesrv-port",
        "0",
        "--listen-port",
        "0",
    )
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        while not (match := BROKER_LISTENING.search(seen[-1] if seen else "")):
            line = await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)
            assert line, "".join(seen)
            seen.append(line.decode())
        assert not [line for line in seen if "config key" in line], seen
        port = int(match.group(1))
        async with await open_connection("127.0.0.1", port) as conn:
            answer = await conn.request(RemotingCommand(RequestCode.GET_BROKER_CONFIG), TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS
        served = dict(line.split("=", 1) for line in answer.body.decode().splitlines())
        assert served["brokerClusterName"] == "DefaultCluster"
        assert served["storePathRootDir"] == str(data)
        assert (data / "lock").exists()
        proc.send_signal(signal.SIGTERM)
        rest = (await asyncio.wait_for(proc.stdout.read(), TIMEOUT)).decode()
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
        assert "config key" not in rest and "standalone stopped" in rest
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
