"""The exactly-once sink under real failures: every row seen once, none lost.

Each test copies a topic with a streaming query (``deliveryGuarantee=exactly-once``),
breaks it at one step of the two-phase commit, restarts the query from its checkpoint,
and counts every message a consumer sees in the output topic.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from rocklet.client.message import Message, MessageExt
from rocklet.client.transaction import HalfMessage, LocalTransactionState
from rocklet.spark.options import parse_sink_options
from rocklet.spark.sink_txn import (
    TXN_PROPERTY,
    CheckAnswers,
    Prepared,
    commit_batch,
    connect,
    find_decision,
)
from tests.spark import eo_driver
from tests.spark.faults import Hostile, is_commit, is_decision, is_half, kill_session
from tests.spark.support import (
    QUERY_TIMEOUT,
    ROOT,
    BrokerThread,
    driver_environment,
    produce,
    pull_all,
)

pytestmark = pytest.mark.spark

ROWS = 240
PER_BATCH = eo_driver.PER_BATCH  # two micro-batches


def _copy(spark: SparkSession, broker: BrokerThread, checkpoint: Path) -> Exception | None:
    """Run the copy to the end (availableNow); the query's failure, if it failed."""
    return eo_driver.copy(spark, broker.namesrv, checkpoint)


def _source(broker: BrokerThread) -> list[bytes]:
    broker.set_queues("EoIn", 2)
    bodies = [f"row-{i}".encode() for i in range(ROWS)]
    produce(broker.namesrv, "EoIn", bodies, queues=2)
    return bodies


def _assert_each_once(broker: BrokerThread, bodies: list[bytes]) -> list[MessageExt]:
    out = pull_all(broker.namesrv, "EoOut")
    seen = Counter(m.body for m in out)
    assert sorted(seen) == sorted(bodies), "rows lost"
    assert max(seen.values()) == 1, f"rows duplicated: {[b for b, n in seen.items() if n > 1]}"
    return out


def test_a_killed_task_and_a_failed_decision_leave_each_row_once(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    """A Python worker killed half-way, then a commit that dies before deciding."""
    bodies = _source(broker)
    checkpoint = tmp_path / "checkpoint"

    # 1. The broker kills the task's Python worker (SIGKILL) at its 31st half message.
    with Hostile(broker, lambda _c, cmd: is_half(cmd), after=30, kill_sender=True) as kill:
        failure = _copy(spark, broker, checkpoint)
    assert kill.killed and failure is not None
    assert pull_all(broker.namesrv, "EoOut") == []  # the half messages stay invisible

    # 2. Restarted: batch 0 runs again with new attempts, and its commit fails before
    #    the decision is written (as if the driver died between the tasks and the commit).
    with Hostile(broker, lambda _c, cmd: is_decision(cmd), after=0) as refuse:
        failure = _copy(spark, broker, checkpoint)
    assert refuse.acted.is_set() and failure is not None
    assert pull_all(broker.namesrv, "EoOut") == []

    # 3. Restarted again: batch 0 runs a third time and commits, then batch 1.
    assert _copy(spark, broker, checkpoint) is None
    out = _assert_each_once(broker, bodies)
    # Every delivered row came from one attempt per partition and batch.
    attempts: dict[str, set[str]] = {}
    for msg in out:
        key, attempt = msg.properties[TXN_PROPERTY].rsplit(":", 1)
        attempts.setdefault(key, set()).add(attempt)
    assert all(len(a) == 1 for a in attempts.values())


def test_a_commit_cut_half_way_is_finished_by_the_restarted_query(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    """The decision is written, then the broker refuses END_TRANSACTION after 50."""
    bodies = _source(broker)
    checkpoint = tmp_path / "checkpoint"
    with Hostile(broker, lambda _c, cmd: is_commit(cmd), after=50) as refuse:
        failure = _copy(spark, broker, checkpoint)
    assert refuse.acted.is_set() and failure is not None
    assert "SinkCommitError" in str(failure) or "were not committed" in str(failure)
    assert len(pull_all(broker.namesrv, "EoOut")) == 50  # half of batch 0 is visible

    # The replay finds the decision: its tasks send nothing, and its commit ends the
    # messages that are not committed yet (never one twice).
    assert _copy(spark, broker, checkpoint) is None
    _assert_each_once(broker, bodies)


def test_a_driver_killed_during_its_commit_is_finished_by_the_next_driver(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    """kill -9 of a whole driver (JVM and Python workers) half-way through its ENDs.

    The next driver is this process's session, started from the same checkpoint.
    """
    bodies = _source(broker)
    argv = [sys.executable, "-m", "tests.spark.eo_driver", broker.namesrv, str(tmp_path / "chk")]
    env = {**os.environ, **driver_environment()}
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        driver = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
        try:
            with Hostile(broker, lambda _c, cmd: is_commit(cmd), after=40, kill_session=driver.pid):
                status = driver.wait(timeout=QUERY_TIMEOUT)
        finally:
            kill_session(driver.pid)  # whatever is left of it
    assert status == -signal.SIGKILL, log.read_text()[-2000:]
    # Cut after 40 ENDs: those already on their way when it died may still be applied
    # (64 are in flight), so part of batch 0 is visible, never all of it.
    assert 40 <= len(pull_all(broker.namesrv, "EoOut")) < PER_BATCH
    assert _copy(spark, broker, tmp_path / "chk") is None
    _assert_each_once(broker, bodies)


def test_check_backs_roll_back_losers_and_leave_winners_to_the_commit(
    broker: BrokerThread,
) -> None:
    """CheckAnswers against a real journal: no Spark needed."""
    opts = parse_sink_options({"nameServer": broker.namesrv})

    def half(tag: str) -> MessageExt:
        return MessageExt(topic="EoOut", body=b"x", properties={TXN_PROPERTY: tag})

    async def main() -> dict[str, LocalTransactionState]:
        async with connect(opts) as (admin, producer):
            assert await find_decision(admin, "q1:7") is None
            before = CheckAnswers(admin)
            undecided = await before(half("q1:7:0:a"))
            # An empty batch decides nothing.
            assert await commit_batch(admin, producer, "q1:7", [Prepared(0, "q1:7", "a")]) == 0
            assert await find_decision(admin, "q1:7") is None
            # Partition 0 won with attempt "a" (one half message), partition 1 with "b".
            sent = await producer.send_half(
                Message("EoOut", b"won", properties={TXN_PROPERTY: "q1:7:0:a"})
            )
            prepared = [
                Prepared(0, "q1:7", "a", (HalfMessage.of("EoOut", sent),)),
                Prepared(1, "q1:7", "b"),
            ]
            assert await commit_batch(admin, producer, "q1:7", prepared) == 1
            # A second commit of the same batch (a replay) keeps the first decision and
            # finds its message committed already: it ends nothing.
            assert await commit_batch(admin, producer, "q1:7", [Prepared(0, "q1:7", "c")]) == 0
            after = CheckAnswers(admin)
            # Many questions about one batch at once share one journal lookup.
            many = await asyncio.gather(*(after(half(f"q1:7:0:c{i}")) for i in range(50)))
            assert set(many) == {LocalTransactionState.ROLLBACK}
            return {
                "undecided": undecided,
                # "Not decided" is believed for a few seconds, then asked again.
                "cached undecided": await before(half("q1:7:0:c")),
                "winner": await after(half("q1:7:0:a")),
                "loser": await after(half("q1:7:0:c")),
                "other partition": await after(half("q1:7:1:a")),
                "not ours": await after(MessageExt(topic="EoOut", body=b"x", properties={})),
            }

    answers = asyncio.run(main())
    assert [m.body for m in pull_all(broker.namesrv, "EoOut")] == [b"won"]
    assert answers == {
        "undecided": LocalTransactionState.UNKNOWN,
        "cached undecided": LocalTransactionState.UNKNOWN,
        "winner": LocalTransactionState.UNKNOWN,
        "loser": LocalTransactionState.ROLLBACK,
        "other partition": LocalTransactionState.ROLLBACK,
        "not ours": LocalTransactionState.UNKNOWN,
    }
