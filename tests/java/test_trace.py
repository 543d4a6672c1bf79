"""Message trace with the official Java client, found again with ``mqadmin queryMsgTraceById``.

A broker with ``traceTopicEnable=true`` (the session's shared ``admin_system``) creates
``RMQ_SYS_TRACE_TOPIC`` (one queue) at start. A producer and a push consumer built with
message trace on (``enableMsgTrace``) send their trace records there, keyed by the
message id; ``queryMsgTraceById`` queries that topic by key and prints a ``Pub`` row for
the producer's group and a ``Sub`` row (from SubAfter) for the consumer's. Run against
Rocklet and a real RocketMQ 4.9.4, the verb in the session's ``mqadmin`` JVM.

Rocklet's SDK with ``trace=True`` writes the same records: the real ``mqadmin`` finds
its sends and consumes too, on both systems.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Final

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.push_consumer import PushConsumer
from tests.compat.harness import route_of
from tests.java.javatier import JavaDriver, System, java_clients, make_topic, tier_marks
from tests.java.mqadmin import MqAdmin

pytestmark = tier_marks()

TOPIC: Final = "JavaTierTraced"
GROUP: Final = "javatier_trace_group"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
STEP_TIMEOUT_S: Final = 90
#: What Rocklet's SDK traces (apart from the Java clients' topic and group).
SDK_TOPIC: Final = "JavaTierSdkTraced"
SDK_GROUP: Final = "javatier_sdk_trace_group"


def rows(output: str, kind: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.split()[:1] == [kind]]


def both_rows(output: str) -> bool:
    return bool(rows(output, "Pub") and rows(output, "Sub"))


async def test_traces_of_a_send_and_a_consume_are_found_by_message_id(
    admin_system: System, admin_tool: MqAdmin, java_driver: JavaDriver, tmp_path: Path
) -> None:
    route = await route_of(admin_system.namesrv, TRACE_TOPIC)
    assert route is not None, "the broker did not create the trace topic"
    assert [(q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        (1, 1, 6)
    ]
    await make_topic(admin_system, TOPIC, 1)
    async with java_clients(java_driver, tmp_path / "clients", admin_system.namesrv) as clients:
        client = await clients.spawn("trace", "trace", TOPIC, GROUP, "traced-1", "120")
        traced = await client.wait_event(("traced", "fatal"), STEP_TIMEOUT_S)
        assert traced["event"] == "traced" and traced["consumed"], client.diagnostics()
        (sent,) = client.of("sent")
        assert sent["status"] == "SEND_OK"
        # The clients send their traces in the background and keep running meanwhile:
        # ask until both rows show (bounded), then let them stop.
        output = await admin_tool.await_output(
            both_rows, "the Pub and Sub traces", "queryMsgTraceById", "-i", sent["msgId"],
            timeout_s=STEP_TIMEOUT_S,
        )  # fmt: skip
        await client.close_stdin()
        done = await client.wait_event(("done", "fatal"), STEP_TIMEOUT_S)
        assert done["event"] == "done", client.diagnostics()
        assert await client.exit_code(STEP_TIMEOUT_S) == 0, client.diagnostics()
    pub, sub = rows(output, "Pub"), rows(output, "Sub")
    assert [r[1] for r in pub] == [f"{GROUP}_producer"], output
    assert [r[1] for r in sub] == [GROUP], output
    assert pub[0][-1] == "success" and sub[0][-1] == "success", output

    # rocklet admin reads the same records: the same rows, and every record in JSON.
    ours = await _rocklet_admin(admin_system, "queryMsgTraceById", "-i", sent["msgId"])
    assert rows(ours, "Pub") == pub and rows(ours, "Sub") == sub, (ours, output)
    records = json.loads(
        await _rocklet_admin(admin_system, "queryMsgTraceById", "-i", sent["msgId"], "--json")
    )
    kinds = {(r["type"], r["group"]) for r in records}
    assert {("Pub", f"{GROUP}_producer"), ("SubAfter", GROUP)} <= kinds, records
    (pub_record,) = [r for r in records if r["type"] == "Pub"]
    assert pub_record["topic"] == TOPIC and len(pub_record["offsetMsgId"]) == 32, pub_record


async def test_the_python_sdk_s_traces_are_found_by_the_real_mqadmin(
    admin_system: System, admin_tool: MqAdmin
) -> None:
    await make_topic(admin_system, SDK_TOPIC, 1)
    consumed = asyncio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeResult:
        consumed.set()
        return ConsumeResult.SUCCESS

    ns = admin_system.namesrv
    async with Producer(f"{SDK_GROUP}_producer", ns, trace=True) as producer:
        sent = await producer.send(Message(SDK_TOPIC, b"traced by rocklet", keys="py-traced"))
        consumer = PushConsumer(SDK_GROUP, ns, consume_from="first", trace=True)
        async with consumer.subscribe(SDK_TOPIC, "*", listener):
            await asyncio.wait_for(consumed.wait(), STEP_TIMEOUT_S)
    # Both closed, so their traces are sent; RocketMQ indexes keys in the background.
    output = await admin_tool.await_output(
        both_rows, "the Pub and Sub traces", "queryMsgTraceById", "-i", sent.msg_id,
        timeout_s=STEP_TIMEOUT_S,
    )  # fmt: skip
    pub, sub = rows(output, "Pub"), rows(output, "Sub")
    assert [r[1] for r in pub] == [f"{SDK_GROUP}_producer"], output
    assert [r[1] for r in sub] == [SDK_GROUP], output
    assert pub[0][-1] == "success" and sub[0][-1] == "success", output


async def _rocklet_admin(system: System, *argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocklet", "admin", *argv, "-n", system.namesrv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), STEP_TIMEOUT_S)
    assert proc.returncode == 0, err.decode()
    return out.decode()
