"""Checks of what callers pass to producers and consumers, made at the call.

A wrong argument fails the call that got it, with ``ValueError`` or ``TypeError``,
instead of travelling on: to a broker, which may refuse far more than that call (an
invalid topic in a heartbeat makes the broker refuse the heartbeat of every group of
the client instance), or to a background task, which would fail on it again and again.

Also here: the :class:`~rocklet.client.errors.ClientStateError` of a client used from
an event loop other than its own, and the one that replaces a cancellation the caller
did not ask for (the client was closed while the call waited).
"""

from __future__ import annotations

import asyncio

from rocklet.client.errors import ClientStateError
from rocklet.protocol.names import check_topic_name, retry_topic

__all__ = [
    "check_listener",
    "check_offset",
    "check_topic",
    "closed_while_waiting",
    "wrong_loop",
]


def check_topic(topic: object, group: str | None = None) -> None:
    """Refuse a topic name that brokers refuse (RocketMQ's ``TopicValidator``).

    Args:
        topic: The name given.
        group: The consumer group that subscribes or pulls it: its own retry topic
            (``%RETRY%<group>``) is accepted at any length, as brokers accept it in
            that group's heartbeat.

    Raises:
        TypeError: ``topic`` is not a string.
        ValueError: The name is empty, too long or has characters other than
            letters, digits, ``%``, ``|``, ``-`` and ``_``.
    """
    if not isinstance(topic, str):
        raise TypeError(f"a topic is a str, not {type(topic).__name__}")
    if group is not None and topic == retry_topic(group):
        return
    if (reason := check_topic_name(topic)) is not None:
        raise ValueError(f"topic: {reason}")


def check_offset(
    value: object, name: str = "offset", minimum: int = 0, maximum: int | None = None
) -> int:
    """Refuse anything but an ``int`` from ``minimum`` to ``maximum`` (``bool`` is not one).

    Args:
        value: The value given.
        name: The argument's name, for the message.
        minimum: The smallest value allowed.
        maximum: The largest value allowed; ``None``: no limit.

    Returns:
        ``value``.

    Raises:
        ValueError: ``value`` is not an int, or is outside the range.
    """
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{name} must be an int, not {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {value}")
    return value


def check_listener(listener: object) -> None:
    """Refuse a listener that cannot be called.

    Raises:
        ValueError: No listener (``None``).
        TypeError: ``listener`` is not callable.
    """
    if listener is None:
        raise ValueError("subscribe needs a listener")
    if not callable(listener):
        raise TypeError(
            f"a listener is an async def or a plain function, not {type(listener).__name__}"
        )


def wrong_loop(what: str) -> ClientStateError:
    """The error of a call made from an event loop the client does not belong to.

    Its connections and tasks live on the loop it was started on: a request written
    from another loop's thread would go out (and take effect) while its caller fails.

    Args:
        what: The client, as the message names it (``"producer 'PG'"``).
    """
    return ClientStateError(
        f"{what} belongs to another event loop (the one it was started on); call it "
        "from that loop, or use rocklet.client.sync from other threads"
    )


def closed_while_waiting(what: str) -> ClientStateError | None:
    """What to raise instead of a ``CancelledError`` that reached a client's call.

    Closing a client cancels the tasks it owns (a route fetch, a connect); a call
    waiting on one of them gets their ``CancelledError`` although its caller cancelled
    nothing, and a caller that did not cancel must not see a cancellation.

    Args:
        what: What was closed, as the message says it (``"producer"``).

    Returns:
        ``ClientStateError("the <what> was closed")``, or ``None`` when the calling
        task itself is being cancelled (the cancellation must go on).
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        return None
    return ClientStateError(f"the {what} was closed while the call waited")
