"""ProcessQueue against a plain sorted-map model, under random operations.

The queue keeps its messages in runs (one per pull) for speed; whatever the order of
puts, removes, takes and commits, it must answer exactly what a naive sorted map
(``min``/``max``/``sorted`` over a dict) answers.
"""

from __future__ import annotations

import random

import pytest

from rocklet.client.message import MessageExt
from rocklet.client.process_queue import ProcessQueue
from rocklet.transport.clock import ManualClock


class Model:
    """The obvious implementation: a dict, sorted on every question."""

    def __init__(self) -> None:
        self.msgs: dict[int, MessageExt] = {}
        self.taken: dict[int, MessageExt] = {}
        self.offset_max = 0

    def put(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            if m.queue_offset not in self.msgs and m.queue_offset not in self.taken:
                self.msgs[m.queue_offset] = m
                self.offset_max = max(self.offset_max, m.queue_offset)

    def remove(self, msgs: list[MessageExt]) -> int:
        if not self.msgs:
            return -1
        for m in msgs:
            self.msgs.pop(m.queue_offset, None)
        return min(self.msgs) if self.msgs else self.offset_max + 1

    def take(self, n: int) -> list[int]:
        head = sorted(self.msgs)[: max(0, n)]
        for offset in head:
            self.taken[offset] = self.msgs.pop(offset)
        return head

    def commit(self) -> int:
        if not self.taken:
            return -1
        last = max(self.taken)
        self.taken.clear()
        return last + 1

    def again(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            self.taken.pop(m.queue_offset, None)
            self.msgs[m.queue_offset] = m

    def state(self) -> tuple[int, int, int, int]:
        cached = [*self.msgs.values(), *self.taken.values()]
        span = max(self.msgs) - min(self.msgs) if self.msgs else 0
        return len(cached), sum(len(m.body) for m in cached), span, self.offset_max


def message(offset: int, rnd: random.Random) -> MessageExt:
    return MessageExt("T", b"x" * rnd.randrange(1, 50), {}, queue_offset=offset)


@pytest.mark.parametrize("seed", range(40))
def test_process_queue_answers_like_a_sorted_map(seed: int) -> None:
    rnd = random.Random(seed)
    pq: ProcessQueue[MessageExt] = ProcessQueue(clock=ManualClock(0))
    model = Model()
    pulled = 0
    for _ in range(150):
        op = rnd.randrange(6)
        if op <= 1:  # a pull: usually the next offsets, sometimes a re-pull or shuffled
            start = pulled if rnd.random() < 0.7 else max(0, pulled - rnd.randrange(40))
            offsets = list(range(start, start + rnd.randrange(0, 35)))
            if rnd.random() < 0.15:
                rnd.shuffle(offsets)
            msgs = [message(o, rnd) for o in offsets]
            pulled = max(pulled, start + len(offsets))
            pq.put(msgs)
            model.put(msgs)
        elif op == 2:  # the listener finished the head batch, or any messages
            cached = sorted(model.msgs.values(), key=lambda m: m.queue_offset)
            k = rnd.randrange(0, 35)
            done = cached[:k] if rnd.random() < 0.7 else rnd.sample(cached, min(k, len(cached)))
            assert pq.remove(done) == model.remove(done)
        elif op == 3:
            n = rnd.randrange(-1, 35)
            assert [m.queue_offset for m in pq.take(n)] == model.take(n)
        elif op == 4:
            assert pq.commit() == model.commit()
        else:
            taken = list(model.taken.values())
            back = rnd.sample(taken, rnd.randrange(len(taken) + 1)) if taken else []
            pq.make_consume_again(back)
            model.again(back)
        assert (pq.count, pq.size, pq.max_span(), pq.queue_offset_max) == model.state()
        assert pq.is_empty() == (not model.msgs)
        info = pq.snapshot(0)
        assert (info.cached_msg_min_offset, info.cached_msg_max_offset) == (
            (min(model.msgs), max(model.msgs)) if model.msgs else (0, 0)
        )
        assert (info.transaction_msg_min_offset, info.transaction_msg_max_offset) == (
            (min(model.taken), max(model.taken)) if model.taken else (0, 0)
        )
