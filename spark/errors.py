"""Errors of the broker source that tell the user what to create or change.

A read that cannot work should fail on the driver, before any task runs, with the
names involved (topic, group, brokers, name server) and the command that fixes it:
a Spark stack trace around ``CODE: 26 DESC: ...`` from an executor, or an empty
result for a misspelt topic, leaves a first-time user guessing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "ConsumerGroupNotFoundError",
    "RockletSourceError",
    "TopicNotFoundError",
    "group_not_found",
    "topics_not_found",
]


class RockletSourceError(RuntimeError):
    """The cluster cannot serve the read as asked (not an option's syntax)."""


class TopicNotFoundError(RockletSourceError):
    """A subscribed (or assigned) topic does not exist: the name server has no route."""


class ConsumerGroupNotFoundError(RockletSourceError):
    """A broker refuses pulls of the source's consumer group: it does not exist there."""


def topics_not_found(
    topics: Sequence[str], name_server: str, clusters: Sequence[str]
) -> TopicNotFoundError:
    """The error for topics the name server does not know.

    Args:
        topics: The missing topics, sorted.
        name_server: The name server address(es) asked.
        clusters: The clusters the name server knows (to fill in the command).

    Returns:
        The error, with the command that creates the topics.
    """
    cluster = clusters[0] if len(clusters) == 1 else "<clusterName>"
    names = ", ".join(repr(t) for t in topics)
    noun = "topic" if len(topics) == 1 else "topics"
    verb = "does" if len(topics) == 1 else "do"
    commands = "; ".join(
        f"rocklet admin updateTopic -n {name_server} -c {cluster} -t {t}" for t in topics
    )
    known = f" (clusters there: {', '.join(clusters)})" if len(clusters) > 1 else ""
    return TopicNotFoundError(
        f"{noun} {names} {verb} not exist on name server {name_server}: it has no route "
        f"for it. Check the name, or create it: {commands}{known}"
    )


def group_not_found(
    group: str, name_server: str, brokers: Mapping[str, str | None]
) -> ConsumerGroupNotFoundError:
    """The error for a consumer group some brokers do not have.

    Args:
        group: The source's consumer group.
        name_server: The name server address(es).
        brokers: Broker name -> master address, of the brokers that refused it.

    Returns:
        The error, with the command that creates the group on each broker.
    """
    names = ", ".join(
        f"{name} ({addr})" if addr else name for name, addr in sorted(brokers.items())
    )
    commands = "; ".join(
        f"rocklet admin updateSubGroup -n {name_server} -b {addr or '<brokerAddr>'} -g {group}"
        for _name, addr in sorted(brokers.items())
    )
    return ConsumerGroupNotFoundError(
        f"consumer group {group!r} does not exist on broker {names}, which does not create "
        f"groups on first use (autoCreateSubscriptionGroup=false). Create it: {commands}; "
        "or set the option consumerGroup to a group that exists."
    )
