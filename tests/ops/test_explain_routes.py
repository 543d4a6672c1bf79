"""rocklet produce / consume on a topic the name server routes but no broker serves.

Met in a failover: the master is gone and only its slave is registered. The SDK sees
"no writable queue" (a send) or TOPIC_NOT_EXIST from the slave (a slave that had not
synced the topic yet); neither is a missing topic, and the line must not say so.
"""

from __future__ import annotations

import json
from pathlib import Path

from rocklet.broker.app import Broker
from rocklet.broker.config import BrokerRole
from rocklet.broker.namesrv.server import NamesrvServer
from rocklet.client.errors import NoRouteError, TopicNotExistError
from rocklet.explain import describe_error
from tests.cluster import small_broker_config


def _topics_file(store: Path, *topics: str) -> None:
    table = {
        t: {"topicName": t, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6} for t in topics
    }
    config = store / "config"
    config.mkdir(parents=True)
    (config / "topics.json").write_text(json.dumps({"topicConfigTable": table}))


async def test_a_route_without_a_master_is_not_called_a_missing_topic(tmp_path: Path) -> None:
    _topics_file(tmp_path / "master", "RepT")
    namesrv = await NamesrvServer.start("127.0.0.1", 0)
    addr = f"127.0.0.1:{namesrv.port}"
    slave: Broker | None = None
    try:
        # The master registers the topic's queues; its slave stays after it stops.
        master = await Broker.start(small_broker_config(tmp_path / "master", addr))
        try:
            slave = await Broker.start(
                small_broker_config(
                    tmp_path / "slave", addr, broker_id=1, broker_role=BrokerRole.SLAVE
                )
            )
        finally:
            await master.stop()
        line = await describe_error(
            NoRouteError("RepT", "no writable queue"), addr, topic="RepT", group="g", sending=True
        )
        assert line.startswith("topic 'RepT' is routed to broker-a, but no master (brokerId 0)")
        assert "autoCreateTopicEnable" not in line

        at = f"127.0.0.1:{slave.port}"
        refused = TopicNotExistError("topic[RepT] not exist, apply first please!", addr=at)
        line = await describe_error(refused, addr, topic="RepT", group="g", sending=False)
        assert line.startswith(f"broker {at} does not have topic 'RepT', though name server")
        assert "does not exist on name server" not in line

        # A topic with no route at all is still a missing topic.
        line = await describe_error(
            NoRouteError("Nowhere"), addr, topic="Nowhere", group="g", sending=False
        )
        assert line.startswith(f"topic 'Nowhere' does not exist on name server {addr}")
    finally:
        if slave is not None:
            await slave.stop()
        await namesrv.stop()
