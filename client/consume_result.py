"""What a push consumer's listener returns for a batch of messages."""

from __future__ import annotations

import enum

__all__ = ["ConsumeResult"]


class ConsumeResult(enum.Enum):
    """A listener's verdict on the batch it was given.

    Concurrent listeners answer :attr:`SUCCESS` or :attr:`RECONSUME_LATER`
    (RocketMQ's ``ConsumeConcurrentlyStatus``); orderly listeners answer
    :attr:`SUCCESS` or :attr:`SUSPEND` (``ConsumeOrderlyStatus``:
    ``SUCCESS`` / ``SUSPEND_CURRENT_QUEUE_A_MOMENT``). A listener that raises is
    treated as :attr:`RECONSUME_LATER` (concurrent) or :attr:`SUSPEND` (orderly), as
    the Java and C++ clients do.
    """

    #: Every message of the batch was processed; its offsets may be committed.
    SUCCESS = "SUCCESS"
    #: Concurrent only: send the batch back to the broker's retry topic for later.
    RECONSUME_LATER = "RECONSUME_LATER"
    #: Orderly only: stop this queue for a moment and retry the same batch locally.
    SUSPEND = "SUSPEND"
