"""Admin request family: topics, subscription groups, offsets, clients and the broker.

RocketMQ serves all of these from one ``AdminBrokerProcessor`` (3,400 lines in 4.9);
here they are split by subject, each module registering its own codes:

- :mod:`rocklet.broker.processors.admin_topics`: create / delete topics, topic configs and
  stats, who consumes a topic (17, 215, 21, 202, 300);
- :mod:`rocklet.broker.processors.admin_groups`: subscription groups, consume stats, offsets
  and offset reset (200, 201, 207, 208, 43, 222);
- :mod:`rocklet.broker.processors.admin_runtime`: runtime info, delay offsets (28, 45);
- :mod:`rocklet.broker.processors.admin_config`: the broker configuration, read and
  updated live (26, 25);
- :mod:`rocklet.broker.processors.admin_clients`: client connections, producers, and the
  requests relayed to a consumer (203, 204, 328, 307, 309);
- :mod:`rocklet.broker.processors.admin_maintenance`: system topics, consume-queue
  clean-up and reads, retention on demand (305, 306, 316, 329, 321);
- :mod:`rocklet.broker.processors.admin_stats`: the broker's statistics and every
  group's progress (315, 317).

The queue-offset queries RocketMQ also routes through its admin processor (29-32) and
the queue locks (41, 42) are served by :mod:`rocklet.broker.processors.consumer_manage`.
"""

from __future__ import annotations

from rocklet.broker.processors import admin_groups, admin_runtime, admin_topics
from rocklet.broker.processors.admin_groups import GroupAdmin
from rocklet.broker.processors.admin_runtime import RuntimeAdmin
from rocklet.broker.processors.admin_topics import TopicAdmin
from rocklet.transport import ProcessorRegistry

__all__ = ["register"]


def register(
    registry: ProcessorRegistry, topics: TopicAdmin, groups: GroupAdmin, runtime: RuntimeAdmin
) -> None:
    """Register every admin code."""
    admin_topics.register(registry, topics)
    admin_groups.register(registry, groups)
    admin_runtime.register(registry, runtime)
