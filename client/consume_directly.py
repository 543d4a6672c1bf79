"""CONSUME_MESSAGE_DIRECTLY (309): run a push consumer's listener on one message now.

An admin tool (``mqadmin queryMsgByUniqueKey -g GROUP -d CLIENT_ID``) asks a broker,
which reads the message and relays it to the named client; the client hands it to the
group's listener outside the normal flow (no offsets, no retries, no statistics) and
answers how it went, as the Java client's ``consumeMessageDirectly`` does:

* concurrent listener: ``SUCCESS`` -> ``CR_SUCCESS``, ``RECONSUME_LATER`` -> ``CR_LATER``;
* orderly listener (``order`` true): ``SUCCESS`` -> ``CR_SUCCESS``, ``SUSPEND`` ->
  ``CR_LATER``;
* anything else returned -> ``CR_RETURN_NULL``; an exception -> ``CR_THROW_EXCEPTION``
  with the exception in ``remark``.

A message of the group's retry topic gets its original topic back first.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.listeners import ListenerTable
from rocklet.client.message import MessageExt
from rocklet.protocol.bodies.maintenance import CMResult, ConsumeMessageDirectlyResult
from rocklet.protocol.properties import Prop
from rocklet.transport.logs import get_logger

__all__ = ["DirectConsumer", "consume_directly"]

_log = get_logger(__name__)

_RESULTS = {
    ConsumeResult.SUCCESS: CMResult.CR_SUCCESS,
    ConsumeResult.RECONSUME_LATER: CMResult.CR_LATER,
    ConsumeResult.SUSPEND: CMResult.CR_LATER,
}


@runtime_checkable
class DirectConsumer(Protocol):
    """A consumer that can consume one message on request (push consumers)."""

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        """Run the listener on ``msg`` and say how it went."""
        ...


async def consume_directly(
    listeners: ListenerTable, msg: MessageExt, *, orderly: bool, retry_topic: str | None
) -> ConsumeMessageDirectlyResult:
    """Hand one message to the listener and describe the outcome.

    Args:
        listeners: The consumer's listeners.
        msg: The message, as stored.
        orderly: Whether the consumer is orderly (reported as ``order``).
        retry_topic: The group's retry topic, if it consumes one.

    Returns:
        The result to answer the broker with.
    """
    if retry_topic is not None and msg.topic == retry_topic:
        msg.topic = msg.properties.get(Prop.RETRY_TOPIC, retry_topic)
    # perf_counter: a duration, not a point in (possibly injected) time.
    started = time.perf_counter_ns()
    remark = None
    try:
        answer = await listeners.call_plain([msg])
        # Anything but the listener kind's own verdicts is "returned null", as in Java.
        known = _RESULTS.get(answer) if isinstance(answer, ConsumeResult) else None
        result = CMResult.CR_RETURN_NULL if known is None else known
    except Exception as exc:
        _log.warning("listener raised on a directly consumed message", error=repr(exc))
        result, remark = CMResult.CR_THROW_EXCEPTION, f"{type(exc).__name__}: {exc}"
    return ConsumeMessageDirectlyResult(
        consume_result=result,
        order=orderly,
        auto_commit=True,
        remark=remark,
        spent_time_mills=(time.perf_counter_ns() - started) // 1_000_000,
    )
