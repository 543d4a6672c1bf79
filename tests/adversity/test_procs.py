"""The harness itself: a broker process stops, is killed with SIGKILL, and starts again."""

from __future__ import annotations

from pathlib import Path

from rocklet.client import Message, Producer
from rocklet.client.pull_consumer import PullConsumer
from tests.adversity.procs import running_broker


async def test_a_broker_process_restarts_over_its_directory(tmp_path: Path) -> None:
    props = {"flushDiskType": "SYNC_FLUSH", "mappedFileSizeCommitLog": "1048576"}
    async with running_broker(tmp_path, props) as broker:
        async with Producer("adv-harness", broker.namesrv_addr) as producer:
            sent = [await producer.send(Message("Harness", f"m{i}".encode())) for i in range(5)]
        assert broker.rss_bytes() > 0 and broker.open_fds() > 0
        assert await broker.stop() == 0
        assert not (broker.store / "abort").exists()
        await broker.restart()
        first_pid = broker.pid
        async with PullConsumer("adv-harness-reader", broker.namesrv_addr) as reader:
            await reader.fetch_queues("Harness")  # the new run's routes
            bodies: set[bytes] = set()
            for result in sent:
                pulled = await reader.pull(result.message_queue, result.queue_offset, 1)
                bodies.update(m.body for m in pulled.messages)
        assert bodies == {f"m{i}".encode() for i in range(5)}
        await broker.kill9()
        assert broker.proc is not None and broker.proc.returncode == -9
        assert (broker.store / "abort").exists()
        await broker.restart()
        assert broker.pid != first_pid and broker.starts == 3
