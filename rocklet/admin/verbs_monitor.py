"""startMonitoring of ``rocklet admin``: every consumer group's backlog, round after round.

mqadmin's ``startMonitoring`` runs RocketMQ's ``MonitorService`` until stopped: each
round (a minute apart, the first after 20 s) it takes every group that has a retry
topic and, per topic it consumes, reports the *undone* messages (the lag summed over
the queues, the largest single queue's lag, and how far behind in store time the
group is), then checks the members' running infos. It writes all that to the client
log. Here the rounds start at once and print as they go:

- a row per group and topic: undone messages, the largest queue's, and the delay (the
  newest stored message's store time minus that of the last one the group consumed,
  over the queues with a backlog);
- a line per problem the members' reports show (:mod:`rocklet.admin.running_analysis`:
  members that subscribe differently, a queue held twice, a listener that seems stuck).

A group that cannot be asked (no broker knows it, no member online) is passed over, as
mqadmin does. ``--interval`` sets the time between rounds (60 s) and ``--rounds`` stops
after that many (mqadmin has no end).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from rocklet.admin.format import Output
from rocklet.admin.groups import running_members
from rocklet.admin.running_analysis import analyse
from rocklet.admin.tool import TOOLS_CONSUMER_GROUP, AdminTool
from rocklet.client.errors import ClientError
from rocklet.client.pull_api import PullStatus
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.names import RETRY_PREFIX, is_retry_topic

__all__ = ["MONITOR_VERBS"]


@dataclass(slots=True)
class _Undone:
    """One topic's backlog for one group (mqadmin's ``UndoneMsgs``)."""

    group: str
    topic: str
    total: int = 0
    single_max: int = 0
    delay_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "consumerGroup": self.group,
            "topic": self.topic,
            "undoneMsgsTotal": self.total,
            "undoneMsgsSingleMQ": self.single_max,
            "undoneMsgsDelayTimeMills": self.delay_ms,
        }


async def _newest_store_time(
    tool: AdminTool, addrs: dict[str, str], mq: MessageQueue, end: int
) -> int:
    """The store time of the queue's newest message (0 when it cannot be read)."""
    addr = addrs.get(mq.broker_name)
    if addr is None or end <= 0:
        return 0
    try:
        found = await tool.pull(addr, mq, end - 1, 1, "*", TOOLS_CONSUMER_GROUP)
    except ClientError:
        return 0
    if found.status is not PullStatus.FOUND or not found.messages:
        return 0
    return found.messages[0].store_timestamp


async def _masters(tool: AdminTool, topic: str) -> dict[str, str]:
    """Broker name -> master address for a topic (empty when it has no route)."""
    try:
        route = await tool.admin.topic_route(topic)
    except ClientError:
        return {}
    return {b.broker_name: b.master_addr for b in route.broker_datas if b.master_addr}


async def _undone(tool: AdminTool, group: str) -> list[_Undone]:
    """The group's backlog per topic it consumes (nothing when it cannot be asked)."""
    try:
        stats = await tool.admin.consume_stats(group)
    except ClientError:
        return []
    by_topic: dict[str, _Undone] = {}
    routes: dict[str, dict[str, str]] = {}
    for mq, w in sorted(stats.offset_table.items()):
        undone = by_topic.setdefault(mq.topic, _Undone(group, mq.topic))
        diff = w.broker_offset - w.consumer_offset
        undone.total += max(diff, 0)
        undone.single_max = max(undone.single_max, diff)
        # A queue with nothing left is not behind in time: no read for it.
        if diff > 0 and w.last_timestamp > 0:
            if mq.topic not in routes:
                routes[mq.topic] = await _masters(tool, mq.topic)
            newest = await _newest_store_time(tool, routes[mq.topic], mq, w.broker_offset)
            undone.delay_ms = max(undone.delay_ms, newest - w.last_timestamp)
    return [by_topic[t] for t in sorted(by_topic)]


async def _problems(tool: AdminTool, group: str) -> list[str]:
    """What the members' running infos show to be wrong (nothing when all is well)."""
    try:
        members = await running_members(tool, group)
    except ClientError:
        return []
    if not members:
        return []
    found = analyse(members, int(time.time() * 1000))
    problems = [] if found.rebalance_ok else found.notes()
    return problems or found.warnings


def _groups(topics: Iterable[str]) -> list[str]:
    return sorted(t[len(RETRY_PREFIX) :] for t in topics if is_retry_topic(t))


def _write_row(out: TextIO, row: _Undone) -> None:
    out.write(
        f"{row.group:<32}  {row.topic:<32}  {row.total:<10}  {row.single_max:<10}  {row.delay_ms}\n"
    )


async def start_monitoring(tool: AdminTool, args: argparse.Namespace) -> Output:
    """startMonitoring: every consumer group's backlog and health, every --interval s."""
    out: TextIO = args.stream
    rounds: list[dict[str, Any]] = []
    done = 0
    while not args.rounds or done < args.rounds:
        if done:
            await asyncio.sleep(args.interval)
        began = time.monotonic()
        groups = _groups(await tool.admin.list_topics())
        if not args.json:
            out.write(f"round {done + 1}: {len(groups)} consumer group(s)\n")
            out.write(f"{'#Group':<32}  {'#Topic':<32}  {'#Undone':<10}  {'#SingleMax':<10}  ")
            out.write("#DelayMs\n")
        for group in groups:
            rows = await _undone(tool, group)
            problems = await _problems(tool, group)
            record = {
                "round": done + 1,
                "consumerGroup": group,
                "undone": [r.to_dict() for r in rows],
                "problems": problems,
            }
            rounds.append(record)
            if args.json:
                out.write(json.dumps(record) + "\n")
            else:
                for row in rows:
                    _write_row(out, row)
                out.writelines(f"NOTIFY {group}: {p}\n" for p in problems)
            out.flush()
        if not args.json:
            out.write(f"round {done + 1} took {(time.monotonic() - began) * 1000:.0f} ms\n\n")
            out.flush()
        done += 1
    return Output(rounds, streamed=True)


#: This module's verbs, by mqadmin name.
MONITOR_VERBS = {"startMonitoring": start_monitoring}
