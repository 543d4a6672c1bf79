"""CONSUMER_SEND_MSG_BACK (36): a message the consumer failed goes to retry or dead letter.

Follows RocketMQ 4.9's ``SendMessageProcessor.asyncConsumerSendMsgBack``
(docs/protocol.md):

1. the group name must pass RocketMQ's rules (else SUBSCRIPTION_GROUP_NOT_EXIST), the
   group must exist (created with defaults when ``autoCreateSubscriptionGroup`` is
   on) and the broker must be writable; a group with no retry queues is answered
   SUCCESS and nothing happens;
2. ``%RETRY%<group>`` is created with the group's ``retryQueueNums`` (perm RW);
3. the original is read back by its commit-log offset;
4. the copy keeps the original's body, flag, sysFlag, born host and time, keys and tags,
   gains ``RETRY_TOPIC`` (the original topic, unless already set), ``WAIT=false`` and
   ``ORIGIN_MESSAGE_ID`` (the original's offset msgId, unless already set), and its
   reconsume count goes up by one;
5. if the original was already consumed ``maxReconsumeTimes`` times (the group's
   ``retryMaxTimes``, or the header's value from clients at V3_4_9 or later), or the
   client asked for a negative delay level, the copy goes to ``%DLQ%<group>`` queue 0
   undelayed (``DELAY=0``, as 4.9.4 writes it); otherwise to a random retry queue with
   ``DELAY`` = the requested level, or 3 + reconsume times when 0 was asked (the C++
   client always asks 0). The store parks a delayed message in ``SCHEDULE_TOPIC_XXXX``
   and the broker's delay service brings it back to the retry topic when it is due.

The group and the retry / dead-letter topic, when created here, are on disk before the
copy is stored; under SYNC_FLUSH the answer waits for the copy to reach the disk, and a
sync that times out or fails is answered SYSTEM_ERROR (as RocketMQ answers any store
failure of a send-back), so the consumer consumes the message again rather than lose it.
Under SYNC_MASTER the answer then waits for a slave; without one, or when it does not
acknowledge within ``slaveTimeout``, the answer is SYSTEM_ERROR with remark
``SLAVE_NOT_AVAILABLE`` / ``FLUSH_SLAVE_TIMEOUT``, as 4.9.4 answers (the copy stays
stored on the master).
"""

from __future__ import annotations

import random
from typing import Final

from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.put_wait import PutWait
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.bodies.route import Perm
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.bodies.topic import TopicConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from rocklet.protocol.message import StoredMessage, decode_message, pack_host
from rocklet.protocol.message_id import make_offset_msg_id
from rocklet.protocol.names import DLQ_PREFIX, RETRY_PREFIX, check_group_name, check_topic_name
from rocklet.protocol.properties import Prop
from rocklet.store.message_store import MessageStore
from rocklet.store.results import ZERO_HOST, MessageToStore, PutMessageStatus
from rocklet.transport import ProcessorRegistry, RequestContext

__all__ = ["SendBackProcessor", "register"]

#: ``MQVersion.V3_4_9``: from this client version on, the header's maxReconsumeTimes counts.
_V3_4_9: Final = 121
#: ``DLQ_NUMS_PER_GROUP``.
_DLQ_QUEUES: Final = 1
_RW: Final = int(Perm.READ | Perm.WRITE)


class _Refused(Exception):
    """A send-back answered early with a response code and remark."""

    def __init__(self, code: ResponseCode, remark: str | None) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class SendBackProcessor:
    """Serves CONSUMER_SEND_MSG_BACK. Event loop only.

    Args:
        store: The message store (the original is read back; the copy is stored).
        topics: Topic configs (retry and dead-letter topics are created).
        groups: Subscription group configs.
        identity: This broker's name, permissions and record host field.
        put_wait: What the put waits for before the answer (SYNC_FLUSH, SYNC_MASTER).
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        identity: BrokerIdentity,
        put_wait: PutWait,
    ) -> None:
        self._store = store
        self._put_wait = put_wait
        self._topics = topics
        self._groups = groups
        self._identity = identity
        self._levels = len(store.config.delay_levels_ms)

    async def process(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Store a failed message again in the group's retry topic or dead-letter queue."""
        h = ConsumerSendMsgBackRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            group = self._check(h.group)
            if group.retry_queue_nums <= 0:
                return cmd.make_response(ResponseCode.SUCCESS)  # retries switched off
            retry = self._topic(f"{RETRY_PREFIX}{group.group_name}", group.retry_queue_nums)
            original = self._original(h.offset)
            msg = self._copy(h, group, retry, original, cmd.version)
        except _Refused as refused:
            return cmd.make_response(refused.code, remark=refused.remark)
        if self._topics.unsaved or self._groups.unsaved:
            try:  # a group or topic created for this send-back is on disk first
                await self._groups.saved(group.group_name)
                await self._topics.saved(retry.topic_name, msg.topic)
            except ConfigWriteError as exc:
                return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        result = self._store.put_message(msg)
        if result.status is not PutMessageStatus.PUT_OK:
            # Java answers every store failure of a send-back with SYSTEM_ERROR.
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=result.status.value)
        code, problem = await self._put_wait.settle(result)
        if code is not ResponseCode.SUCCESS:
            # As RocketMQ: any status but PUT_OK is SYSTEM_ERROR, the slave's named as
            # the status (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE). The consumer keeps
            # the message and consumes it again later.
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=problem or code.name)
        return cmd.make_response(ResponseCode.SUCCESS)

    def _check(self, group_name: str) -> SubscriptionGroupConfig:
        problem = check_group_name(group_name)
        if problem is not None:
            raise _Refused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, problem)
        # The group's topics must be storable (%RETRY% is the longer prefix, so this
        # covers %DLQ% too) before a group config is created for them.
        problem = check_topic_name(f"{RETRY_PREFIX}{group_name}")
        if problem is not None:
            raise _Refused(ResponseCode.SYSTEM_ERROR, problem)
        group = self._groups.find(group_name)
        if group is None:
            raise _Refused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group_name}",
            )
        if not self._identity.writable:
            raise _Refused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self._identity.broker_name}] sending message is forbidden",
            )
        return group

    def _original(self, offset: int) -> StoredMessage:
        """The message at a commit-log offset; anything else there is "not found"."""
        view = self._store.read_record(offset)
        msg: StoredMessage | None = None
        if view is not None:
            try:
                msg = decode_message(view)
            except MessageFormatError:
                msg = None  # the offset points into a record, not at one
        if msg is None or msg.physical_offset != offset:
            raise _Refused(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        return msg

    def _copy(
        self,
        h: ConsumerSendMsgBackRequestHeader,
        group: SubscriptionGroupConfig,
        retry: TopicConfig,
        original: StoredMessage,
        version: int,
    ) -> MessageToStore:
        max_times = group.retry_max_times
        if version >= _V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        props = dict(original.properties)
        props.setdefault(Prop.RETRY_TOPIC, original.topic)
        props[Prop.WAIT] = "false"
        if not props.get(Prop.ORIGIN_MESSAGE_ID):
            # msgExt.getMsgId() of a message the broker read back: its offset msgId.
            props[Prop.ORIGIN_MESSAGE_ID] = _offset_msg_id(original)
        if original.reconsume_times >= max_times or h.delay_level < 0:
            topic = self._topic(f"{DLQ_PREFIX}{group.group_name}", _DLQ_QUEUES).topic_name
            queue_id = 0
            props[Prop.DELAY] = "0"
        else:
            topic = retry.topic_name
            # The group's queue count, within what an older retry topic really has.
            queue_id = random.randrange(max(1, min(group.retry_queue_nums, retry.write_queue_nums)))
            level = h.delay_level or 3 + original.reconsume_times
            # CommitLog clamps a level past the table to its last level.
            props[Prop.DELAY] = str(min(level, self._levels))
        return MessageToStore(
            topic=topic,
            queue_id=queue_id,
            body=original.body,
            properties=props,
            flag=original.flag,
            sys_flag=original.sys_flag,
            born_timestamp=original.born_timestamp,
            born_host=_packed(original.born_host),
            store_host=self._identity.store_host,
            reconsume_times=original.reconsume_times + 1,
        )

    def _topic(self, name: str, queue_nums: int) -> TopicConfig:
        """Get or create a group topic (``createTopicInSendMessageBackMethod``)."""
        config = self._topics.create_system_topic(name, queue_nums, _RW)
        if not config.perm & Perm.WRITE:
            raise _Refused(
                ResponseCode.NO_PERMISSION, f"the topic[{name}] sending message is forbidden"
            )
        return config


def _packed(host: tuple[str, int]) -> bytes:
    try:
        return pack_host(*host)
    except ValueError:  # an IPv6 host from a foreign store: clients only read IPv4
        return ZERO_HOST


def _offset_msg_id(msg: StoredMessage) -> str:
    return make_offset_msg_id(_packed(msg.store_host), msg.physical_offset)


def register(registry: ProcessorRegistry, processor: SendBackProcessor) -> None:
    """Register CONSUMER_SEND_MSG_BACK."""
    registry.register(RequestCode.CONSUMER_SEND_MSG_BACK, processor.process)
