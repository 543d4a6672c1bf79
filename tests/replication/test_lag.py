"""Replication lag, as master and slave processes show it (docs/replication.md).

brokerStatus's ``ha*`` keys, the Prometheus gauges and ``rocklet admin clusterList``
read the same figures; the slave is stopped for real (SIGSTOP: connected but silent,
then kill -9) and restarted.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.adversity.procs import START_TIMEOUT_S, BrokerProcess
from tests.ops.test_admin_cli import admin
from tests.ops.test_metrics import http_get
from tests.replication.nodes import (
    SlaveProcess,
    broker_status,
    ha_port,
    master_props,
    running_master,
    slave_props,
    until,
)
from tests.replication.test_replication import send_some

_METRICS_LINE = re.compile(r"\bmetrics listening.*port=(\d+)")


async def metrics_port(node: BrokerProcess) -> int:
    return int((await node.wait_line(_METRICS_LINE, START_TIMEOUT_S))[1])


async def gauges(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    status, body = await http_get(port, "/metrics")
    assert status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name.startswith("rocklet_ha_")
    }


async def master_caught_up(addr: str, slaves: int = 1) -> dict[str, str]:
    """The master's status once it has ``slaves`` slaves that acknowledged everything."""
    got: dict[str, str] = {}

    async def check() -> bool:
        got.update(await broker_status(addr))
        return got["haConnectedSlaves"] == str(slaves) and all(
            got[f"haSlave{i}LagBytes"] == "0" for i in range(slaves)
        )

    await until(f"{slaves} slave(s) acknowledging everything", check)
    return got


async def test_lag_grows_while_the_slave_is_stopped_and_returns_to_zero(
    tmp_path: Path,
) -> None:
    async with running_master(tmp_path / "m", master_props(metricsPort="0")) as master:
        await ha_port(master)
        mport = await metrics_port(master)
        await send_some(master.broker_addr, 20)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props(metricsPort="0"))
        try:
            await slave.start()
            sport = await metrics_port(slave)
            status = await master_caught_up(master.broker_addr)
            end = int(status["commitLogMaxOffset"])
            assert status["haSlave0AckOffset"] == str(end) == status["haSlaveAckOffset"]
            assert status["haSlave0LagSeconds"] == "0.000" == status["haMaxLagSeconds"]
            assert status["haSlaveFallBehind"] == "0"
            mine = await broker_status(slave.broker_addr)
            assert (mine["haOffset"], mine["haMasterOffset"]) == (str(end), str(end))
            assert (mine["haLagBytes"], mine["haLagSeconds"]) == ("0", "0.000")
            assert mine["haConnected"] == "true"
            # The slave counts what it replicates in its store totals, as RocketMQ's does.
            assert mine["putMessageTimesTotal"] == "20" == status["putMessageTimesTotal"]
            assert mine["putMessageSizeTotal"] == status["putMessageSizeTotal"]
            rows = await cluster_list(master.namesrv_addr)
            cells = {r["brokerId"]: r["replication"] for r in rows}
            assert cells == {0: "1 slave, max lag 0 B 0.000 s", 1: "lag 0 B 0.000 s"}

            # Stopped: still connected, acknowledges nothing; the lag grows.
            os.kill(slave.pid, signal.SIGSTOP)
            await send_some(master.broker_addr, 5, start=20)
            stopped = await broker_status(master.broker_addr)
            behind = int(stopped["commitLogMaxOffset"]) - end
            assert stopped["haSlave0LagBytes"] == str(behind) == stopped["haSlaveFallBehind"]
            first = float(stopped["haSlave0LagSeconds"])  # may still round to 0.000

            async def older() -> bool:
                s = await broker_status(master.broker_addr)
                return float(s["haSlave0LagSeconds"]) >= first + 0.3

            await until("the unacknowledged messages' age to grow", older)
            addr = stopped["haSlave0Addr"]
            samples = await gauges(mport)
            assert samples[("rocklet_ha_slave_lag_bytes", frozenset({("slave", addr)}))] == behind
            assert samples[("rocklet_ha_slave_lag_seconds", frozenset({("slave", addr)}))] > first
            assert samples[("rocklet_ha_connected_slaves", frozenset())] == 1

            # Killed: the master drops it, and says how far behind it is left.
            os.kill(slave.pid, signal.SIGKILL)
            await slave.close()

            async def gone() -> bool:
                return (await broker_status(master.broker_addr))["haConnectedSlaves"] == "0"

            await until("the master dropping the killed slave", gone)
            status = await broker_status(master.broker_addr)
            assert status["haSlaveFallBehind"] == str(behind)
            assert "haSlave0Addr" not in status

            # Restarted: it catches up, and both sides show no lag again.
            await slave.start()
            sport = await metrics_port(slave)
            status = await master_caught_up(master.broker_addr)
            assert status["haSlave0LagSeconds"] == "0.000"
            mine = await broker_status(slave.broker_addr)
            assert mine["haOffset"] == status["commitLogMaxOffset"] == mine["haMasterOffset"]
            assert (mine["haLagBytes"], mine["haLagSeconds"]) == ("0", "0.000")
            assert mine["putMessageTimesTotal"] == "5"  # since its restart
            samples = await gauges(sport)
            assert samples[("rocklet_ha_lag_bytes", frozenset())] == 0
            assert samples[("rocklet_ha_connected", frozenset())] == 1
            assert samples[("rocklet_ha_master_offset_bytes", frozenset())] == int(mine["haOffset"])

            # Restarted with nothing new to copy: once its bytes check out it reports
            # its real end, not where the check began (no lag on an idle cluster).
            await slave.close()
            await until("the master dropping the stopped slave", gone)
            await slave.start()
            status = await master_caught_up(master.broker_addr)
            assert status["haSlave0LagBytes"] == "0" == status["haSlaveFallBehind"]
        finally:
            await slave.close()


async def cluster_list(namesrv: str) -> list[dict[str, object]]:
    """``rocklet admin clusterList --json``."""
    code, out, err = await admin(None, "clusterList", "-n", namesrv, "--json")
    assert code == 0, err
    rows: list[dict[str, object]] = json.loads(out)
    return rows
